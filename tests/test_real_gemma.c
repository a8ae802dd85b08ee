/* test_real_gemma.c: the SentencePiece tokenizer on a real vocabulary (Gemma
 * 3's, 262,144 tokens with scores and byte-fallback tokens) against the ids
 * llama.cpp makes for 240 strings (ASCII, whitespace runs, digits, CJK,
 * emoji, mixed scripts, special tokens), recorded by tests/ref/spm_tokens.py:
 * as Gemma's file has it (no space prefix), and as a Llama 2-style
 * vocabulary with a space prefix (tests/ref/spm_vocab.py, remade here with
 * the gguf package). Needs the model (tools/fetch-model.sh gemma3-270m, run
 * by tools/test.sh); part of the real-model binary. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "support.h"
#include "tokenizer/tokenizer.h"

/* The model: models/ under the source tree, or $MINFER_GEMMA; the size the
 * fixture was made from. */
static const char *gemma_path(long long bytes, const char *file)
{
    static char path[1024];
    const char *env = getenv("MINFER_GEMMA");
    if (env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/models/%s", src_dir(), file);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s is missing: tools/fetch-model.sh gemma3-270m fetches it", path);
    cr_assert_eq((long long)st.st_size, bytes, "%s has %lld bytes, the fixture was made from %lld", path,
                 (long long)st.st_size, bytes);
    return path;
}

/* Every case of fixture (under tests/fixtures/data) against the vocabulary
 * at path (NULL: the Gemma file the fixture names). */
static void check_fixture(const char *name, const char *path, bool space_prefix)
{
    char fixture[1024], file[256];
    long long bytes;
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/data/%s", src_dir(), name);
    FILE *f = fopen(fixture, "rb");
    cr_assert_not_null(f, "%s", fixture);
    cr_assert_eq(fscanf(f, "model %255s %lld llama_cpp %*s\n", file, &bytes), 2, "%s: the model line", fixture);
    struct gguf g;
    struct tokenizer t;
    struct error e;
    cr_assert_eq(gguf_open(&g, path ? path : gemma_path(bytes, file), &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&t, &g, &e), 0, "%s", e.msg);
    cr_assert(t.model == TOKENIZER_SPM && t.add_space_prefix == space_prefix && t.add_bos, "the vocabulary as its file says");
    int cases = 0;
    size_t len, n_ids;
    char line[128];
    while (fgets(line, sizeof line, f) && sscanf(line, "case %zu %zu", &len, &n_ids) == 2) { /* not fscanf's "\n": it would eat the text's leading spaces */
        char *text = malloc(len + 1);
        int32_t *want = malloc(n_ids * sizeof *want), *ids = NULL;
        cr_assert(fread(text, 1, len, f) == len && fgetc(f) == '\n', "%s: case %d's text", fixture, cases);
        text[len] = 0;
        for (size_t i = 0; i < n_ids; i++)
            cr_assert_eq(fscanf(f, "%d", &want[i]), 1, "%s: case %d's ids", fixture, cases);
        cr_assert_eq(fgetc(f), '\n', "%s: case %d's end", fixture, cases);
        size_t n = 0, cap = 0;
        cr_assert_eq(tokenizer_push_bos(&t, &ids, &n, &cap, &e), 0, "%s", e.msg);
        cr_assert_eq(tokenizer_encode(&t, text, len, true, &ids, &n, &cap, &e), 0, "%s", e.msg);
        cr_assert_eq(n, n_ids, "'%s': %zu ids, llama.cpp made %zu", text, n, n_ids);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(ids[i], want[i], "'%s': id %zu is %d, llama.cpp made %d", text, i, ids[i], want[i]);
        /* and back: the ids decode to the text (byte tokens and U+2581
         * undone; with a space prefix, the added spaces would come back too) */
        struct detokenizer d = { .n_pending = 0 };
        char *back = malloc(4 * len + 64);
        size_t got = 0;
        for (size_t i = 1; i < n && !space_prefix; i++)
            got += detokenize_push(&d, &t, ids[i], back + got, 4 * len + 64 - got);
        got += detokenize_flush(&d, back + got, 4 * len + 64 - got);
        cr_assert(space_prefix || (got == len && memcmp(back, text, len) == 0), "'%s' decodes to '%.*s'", text, (int)got,
                  back);
        free(text), free(want), free(ids), free(back);
        cases++;
    }
    fclose(f);
    cr_assert_geq(cases, 200, "%s: %d cases", fixture, cases);
    tokenizer_free(&t);
    gguf_free(&g);
}

Test(real_gemma, spm_tokens_equal_llama_cpp, .timeout = 300)
{
    check_fixture("gemma-3-270m.tokens.txt", NULL, false);
}

Test(real_gemma, spm_tokens_with_a_space_prefix_equal_llama_cpp, .timeout = 300)
{
    const char *vocab = temp_path(".gguf");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 %s/tests/ref/spm_vocab.py %s %s", src_dir(),
             gemma_path(253113024, "gemma-3-270m-q4_k_m.gguf"), vocab);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s\n%s", cmd, out ? out : "");
    free(out);
    check_fixture("gemma-3-270m-space-prefix.tokens.txt", vocab, true);
}
