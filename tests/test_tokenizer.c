/* test_tokenizer.c: minfer's tokenizer against Hugging Face `tokenizers` on
 * Qwen's real vocabulary (tests/ref/qwen_tokenizer.py builds both from the
 * qwen.tiktoken file the dashscope package ships): every id of 300+ texts
 * (ASCII, whitespace runs, digits, contractions, CJK, emoji, mixed scripts,
 * special tokens), round trips back to the bytes, and streaming decoding
 * that never emits half a UTF-8 character. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "support.h"
#include "tokenizer/tokenizer.h"

struct case_ {
    char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
};

static struct tokenizer tok;
static struct gguf vocab;
static struct case_ *cases;
static int n_cases;
static const char *vocab_file = "qwen_vocab.gguf", *cases_file = "cases.txt";

static int unhex(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

static void load(void)
{
    const char *dir = temp_path(".tok");
    char cmd[1024], *out, path[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && python3 %s/tests/ref/qwen_tokenizer.py %s", dir, src_dir(), dir);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s\n%s", cmd, out);
    free(out);
    struct error e;
    snprintf(path, sizeof path, "%s/%s", dir, vocab_file);
    cr_assert_eq(gguf_open(&vocab, path, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&tok, &vocab, &e), 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/%s", dir, cases_file);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char line[1 << 16];
    cases = calloc(1024, sizeof *cases);
    while (fgets(line, sizeof line, f) && n_cases < 1024) {
        struct case_ *c = &cases[n_cases++];
        char *tab = strchr(line, '\t');
        cr_assert_not_null(tab);
        c->len = (size_t)(tab - line) / 2;
        c->text = malloc(c->len + 1);
        for (size_t i = 0; i < c->len; i++)
            c->text[i] = (char)(unhex(line[2 * i]) << 4 | unhex(line[2 * i + 1]));
        c->text[c->len] = 0;
        c->ids = malloc(strlen(tab) * sizeof *c->ids);
        for (char *p = tab + 1, *end; (c->ids[c->n_ids] = (int32_t)strtol(p, &end, 10)), end != p; p = end)
            c->n_ids++;
    }
    fclose(f);
}

static void show(const struct case_ *c, const int32_t *got, size_t n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "text \"%s\"\n  want", c->text);
    for (size_t i = 0; i < c->n_ids && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, " %d", c->ids[i]);
    len += (size_t)snprintf(buf + len, cap - len, "\n  got ");
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, " %d", got[i]);
}

/* Encodes every loaded case and fails with the first text whose ids differ. */
static void expect_every_case_matches(void)
{
    struct error e;
    int32_t *ids = NULL;
    size_t cap = 0;
    int mismatches = 0;
    static char report[1 << 14];
    for (int k = 0; k < n_cases; k++) {
        size_t n = 0;
        cr_assert_eq(tokenizer_encode(&tok, cases[k].text, cases[k].len, true, &ids, &n, &cap, &e), 0, "%s", e.msg);
        if ((n != cases[k].n_ids || memcmp(ids, cases[k].ids, n * sizeof *ids) != 0) && mismatches++ == 0)
            show(&cases[k], ids, n, report, sizeof report);
    }
    cr_assert_eq(mismatches, 0, "%d of %d texts differ; the first:\n%s", mismatches, n_cases, report);
    free(ids);
}

Test(tokenizer, every_id_matches_hugging_face_tokenizers, .timeout = 120)
{
    load();
    cr_assert_geq(n_cases, 200);
    expect_every_case_matches();
}

/* Llama 3's split (digits in threes), on the same vocabulary plus every 2-
 * and 3-digit string, against tokenizers with Llama 3's expression. */
Test(tokenizer, llama3_split_matches_too, .timeout = 120)
{
    vocab_file = "llama3_split.gguf";
    cases_file = "llama3_cases.txt";
    load();
    cr_assert_eq(tok.pre, PRE_LLAMA3);
    expect_every_case_matches();
    struct error e;
    int32_t *ids = NULL;
    size_t cap = 0, n = 0;
    cr_assert_eq(tokenizer_encode(&tok, "12345", 5, true, &ids, &n, &cap, &e), 0);
    cr_assert_eq(n, 2, "12345 splits as 123 45");
    free(ids);
}

Test(tokenizer, decoding_gives_back_the_bytes_and_streams_whole_characters, .timeout = 120)
{
    load();
    for (int k = 0; k < n_cases; k++) {
        const struct case_ *c = &cases[k];
        static char joined[1 << 16], chunk[1024];
        size_t len = 0;
        struct detokenizer d = { .n_pending = 0 };
        for (size_t i = 0; i < c->n_ids; i++) {
            size_t n = detokenize_push(&d, &tok, c->ids[i], chunk, sizeof chunk);
            /* a chunk never ends inside a UTF-8 sequence */
            size_t j = n;
            while (j > 0 && ((unsigned char)chunk[j - 1] & 0xc0) == 0x80)
                j--;
            if (j > 0 && n > 0) {
                unsigned char lead = (unsigned char)chunk[j - 1];
                size_t need = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : 4;
                cr_assert_eq(n - (j - 1), need, "case %d: chunk %zu ends inside a character", k, i);
            }
            memcpy(joined + len, chunk, n);
            len += n;
        }
        len += detokenize_flush(&d, joined + len, sizeof joined - len);
        cr_assert(len == c->len && memcmp(joined, c->text, len) == 0, "case %d \"%s\" decodes to \"%.*s\"", k, c->text,
                  (int)len, joined);
    }
}

Test(tokenizer, specials_are_text_unless_parsed)
{
    load();
    struct error e;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    const char *s = "<|im_start|>user";
    cr_assert_eq(tokenizer_encode(&tok, s, strlen(s), true, &ids, &n, &cap, &e), 0);
    cr_assert(n == 2 && ids[0] == tokenizer_find(&tok, "<|im_start|>", 12), "parsed: %zu ids", n);
    n = 0;
    cr_assert_eq(tokenizer_encode(&tok, s, strlen(s), false, &ids, &n, &cap, &e), 0);
    cr_assert_gt(n, 2, "unparsed specials are ordinary text");
    for (size_t i = 0; i < n; i++)
        cr_assert_lt(ids[i], 151643);
    free(ids);
}

static void refused(const char *model, const char *pre, const char *expect)
{
    struct buf b = { 0 };
    buf_u32(&b, GGUF_MAGIC);
    buf_u32(&b, 3);
    buf_u64(&b, 0);
    buf_u64(&b, 2);
    buf_str(&b, "tokenizer.ggml.model");
    buf_u32(&b, GGUF_STRING);
    buf_str(&b, model);
    buf_str(&b, "tokenizer.ggml.pre");
    buf_u32(&b, GGUF_STRING);
    buf_str(&b, pre);
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_parse(&g, b.p, b.n, &e), 0, "%s", e.msg);
    struct tokenizer t;
    cr_assert_eq(tokenizer_load(&t, &g, &e), -1);
    cr_assert_str_eq(e.msg, expect);
    gguf_free(&g);
    buf_free(&b);
}

Test(tokenizer, a_vocabulary_it_cannot_read_is_refused_not_guessed)
{
    refused("t5", "default", "tokenizer model 't5' is not supported (minfer reads byte-level BPE, 'gpt2', and "
                             "SentencePiece, 'llama')");
    refused("gpt2", "deepseek-llm", "pre-tokenizer 'deepseek-llm' is not supported (minfer has qwen2 and llama-bpe)");
}

/* ---- SentencePiece ("llama") on a vocabulary made here, Llama 2's way:
 * a space before the text and after a special token, merges by score,
 * byte-fallback tokens. (Gemma's real vocabulary is checked against
 * llama.cpp in test_real_gemma.c.) ---- */

enum { SPM_UNK, SPM_BOS, SPM_EOS, SPM_BYTE0, SPM_SPACE = SPM_BYTE0 + 256, SPM_A, SPM_B, SPM_SPACE_A, SPM_AB,
       SPM_SPACE_AB, SPM_CTL, SPM_N };

static void spm_vocab(struct buf *b, bool space_prefix)
{
    static char bytes[256][8];
    const char *text[SPM_N] = { "<unk>", "<s>", "</s>" };
    float score[SPM_N] = { 0 };
    int32_t type[SPM_N] = { 2, 3, 3 };
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        text[SPM_BYTE0 + i] = bytes[i], type[SPM_BYTE0 + i] = 6;
    }
    const struct { int id; const char *text; float score; } rest[] = {
        { SPM_SPACE, "\xe2\x96\x81", -10 }, { SPM_A, "a", -10 }, { SPM_B, "b", -10 },
        { SPM_SPACE_A, "\xe2\x96\x81" "a", -1 }, { SPM_AB, "ab", -2 }, { SPM_SPACE_AB, "\xe2\x96\x81" "ab", -0.5f },
        { SPM_CTL, "<ctl>", 0 } };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++)
        text[rest[i].id] = rest[i].text, score[rest[i].id] = rest[i].score, type[rest[i].id] = rest[i].id == SPM_CTL ? 3 : 1;
    buf_u32(b, GGUF_MAGIC), buf_u32(b, 3), buf_u64(b, 0), buf_u64(b, 7);
    buf_str(b, "tokenizer.ggml.model"), buf_u32(b, GGUF_STRING), buf_str(b, "llama");
    buf_str(b, "tokenizer.ggml.tokens"), buf_u32(b, GGUF_ARRAY), buf_u32(b, GGUF_STRING), buf_u64(b, SPM_N);
    for (int i = 0; i < SPM_N; i++)
        buf_str(b, text[i]);
    buf_str(b, "tokenizer.ggml.scores"), buf_u32(b, GGUF_ARRAY), buf_u32(b, GGUF_FLOAT32), buf_u64(b, SPM_N);
    buf_put(b, score, sizeof score);
    buf_str(b, "tokenizer.ggml.token_type"), buf_u32(b, GGUF_ARRAY), buf_u32(b, GGUF_INT32), buf_u64(b, SPM_N);
    buf_put(b, type, sizeof type);
    buf_str(b, "tokenizer.ggml.bos_token_id"), buf_u32(b, GGUF_UINT32), buf_u32(b, SPM_BOS);
    buf_str(b, "tokenizer.ggml.unknown_token_id"), buf_u32(b, GGUF_UINT32), buf_u32(b, SPM_UNK);
    buf_str(b, "tokenizer.ggml.add_space_prefix"), buf_u32(b, GGUF_BOOL), buf_u8(b, space_prefix);
}

static void spm_case(bool space_prefix, const char *text, bool special, const int32_t *want, size_t n_want,
                     const char *decoded)
{
    struct buf b = { 0 };
    spm_vocab(&b, space_prefix);
    struct gguf g;
    struct tokenizer t;
    struct error e;
    cr_assert_eq(gguf_parse(&g, b.p, b.n, &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&t, &g, &e), 0, "%s", e.msg);
    cr_assert(t.model == TOKENIZER_SPM && t.add_bos && t.add_space_prefix == space_prefix && t.unk == SPM_UNK);
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    cr_assert_eq(tokenizer_encode(&t, text, strlen(text), special, &ids, &n, &cap, &e), 0, "%s", e.msg);
    cr_assert_eq(n, n_want, "'%s': %zu ids, want %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], want[i], "'%s': id %zu is %d, want %d", text, i, ids[i], want[i]);
    char out[256];
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += tokenizer_piece(&t, ids[i], out + len, sizeof out - len);
    cr_assert(len == strlen(decoded) && memcmp(out, decoded, len) == 0, "'%s' decodes to '%.*s'", text, (int)len, out);
    free(ids);
    tokenizer_free(&t);
    gguf_free(&g);
    buf_free(&b);
}

Test(tokenizer, sentencepiece_merges_by_score_with_a_space_prefix_and_byte_fallback)
{
    /* "_ab": _a (-1) before ab (-2), then _a + b = _ab (-0.5) */
    spm_case(true, "ab", true, (int32_t[]){ SPM_SPACE_AB }, 1, " ab");
    /* no pair of "_ba" is a token */
    spm_case(true, "ba", true, (int32_t[]){ SPM_SPACE, SPM_B, SPM_A }, 3, " ba");
    /* a character outside the vocabulary: its UTF-8 bytes */
    spm_case(true, "a\xc3\xa9", true, (int32_t[]){ SPM_SPACE_A, SPM_BYTE0 + 0xc3, SPM_BYTE0 + 0xa9 }, 3, " a\xc3\xa9");
    /* a control token when asked, and the space again after it */
    spm_case(true, "a<ctl>a", true, (int32_t[]){ SPM_SPACE_A, SPM_CTL, SPM_SPACE_A }, 3, " a<ctl> a");
    /* not asked: its text, as bytes */
    spm_case(true, "a<ctl>", false,
             (int32_t[]){ SPM_SPACE_A, SPM_BYTE0 + '<', SPM_BYTE0 + 'c', SPM_BYTE0 + 't', SPM_BYTE0 + 'l', SPM_BYTE0 + '>' }, 6,
             " a<ctl>");
    /* without the prefix (Gemma's files say so), and spaces inside the text */
    spm_case(false, "ab", true, (int32_t[]){ SPM_AB }, 1, "ab");
    spm_case(false, "b ab", true, (int32_t[]){ SPM_B, SPM_SPACE_AB }, 2, "b ab");
}
