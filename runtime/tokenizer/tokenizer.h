/* tokenizer.h: tokenizers from GGUF metadata: byte-level BPE
 * (tokenizer.ggml.model "gpt2": tokens, merges, token types) with the Qwen2
 * or Llama 3 pre-tokenizer (tokenizer.ggml.pre "qwen2" or "llama-bpe";
 * others are refused rather than guessed), and SentencePiece-style merging
 * by score ("llama": Llama 2, Mistral, Gemma; spm.h) with byte-fallback
 * tokens. Special tokens are matched before either: user-defined ones
 * always, control ones when asked (as llama.cpp does). Decoding turns ids
 * back into bytes; a streaming decoder holds back incomplete UTF-8 so no
 * half character is ever printed. */
#ifndef MINFER_TOKENIZER_H
#define MINFER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenize.h"

struct merge_entry;

enum tokenizer_model { TOKENIZER_BPE, TOKENIZER_SPM };

struct tokenizer {
    enum tokenizer_model model;
    int32_t n_vocab;
    const char **text;        /* token strings (BPE: byte-level alphabet; SPM: spaces as U+2581), into the file */
    uint32_t *len;
    int32_t *type;            /* tokenizer.ggml.token_type, 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte */
    float *scores;            /* SPM: tokenizer.ggml.scores, a merge's priority */
    int32_t *index;           /* open-addressing hash of token strings -> id + 1 */
    uint32_t index_mask;
    struct merge_entry *merges;
    uint32_t merge_mask;
    int32_t byte_id[256];     /* the token of each single byte (SPM: <0xXX>, -1 where absent) */
    int32_t *special;         /* control and user-defined tokens by first byte, then longest first */
    int n_special;
    int special_from[257];    /* special[special_from[b] .. special_from[b + 1]) start with byte b */
    int32_t bos, eos, unk;    /* -1 when the file names none */
    bool add_bos;             /* a text starts with bos (tokenizer.ggml.add_bos_token) */
    bool add_space_prefix;    /* SPM: a space before text that starts the input or follows a special token */
    enum pretokenizer pre;    /* tokenizer.ggml.pre: how text is split before BPE */
};

/* Reads the vocabulary from g; the tokenizer keeps pointers into g's data. */
int tokenizer_load(struct tokenizer *t, const struct gguf *g, struct error *e);
void tokenizer_free(struct tokenizer *t);

/* Encodes n bytes of text. User-defined token strings in the text become
 * their ids, and with parse_special control ones too (<|im_start|>,
 * <start_of_turn>); the rest is encoded as plain text. The ids go to *out
 * (grown with realloc; *n_out is the count, *cap the capacity). */
int tokenizer_encode(const struct tokenizer *t, const char *text, size_t n, bool parse_special, int32_t **out,
                     size_t *n_out, size_t *cap, struct error *e);

/* Appends the BOS token to *out as tokenizer_encode appends ids. */
int tokenizer_push_bos(const struct tokenizer *t, int32_t **out, size_t *n_out, size_t *cap, struct error *e);

/* Appends k ids to the growing array *out (*n used of *cap). */
int tokens_append(int32_t **out, size_t *n, size_t *cap, const int32_t *ids, size_t k, struct error *e);

/* The token id of an exact token string, or -1. */
int32_t tokenizer_find(const struct tokenizer *t, const char *s, size_t n);

/* The tokens that end a reply: eos, <|im_end|>, <|endoftext|>, <|eot_id|>,
 * <end_of_turn> (-1 where the vocabulary lacks one). */
#define TOKENIZER_END_IDS 5
void tokenizer_end_ids(const struct tokenizer *t, int32_t out[TOKENIZER_END_IDS]);

/* The bytes token id stands for, into buf (up to cap); returns the length
 * (which may exceed cap: then only cap bytes were written). */
size_t tokenizer_piece(const struct tokenizer *t, int32_t id, char *buf, size_t cap);

/* Streaming decode: push ids, get back only whole UTF-8 characters. */
struct detokenizer {
    char pending[8];
    int n_pending;
};

/* Appends the printable part of token id to out (cap bytes); returns its length. */
size_t detokenize_push(struct detokenizer *d, const struct tokenizer *t, int32_t id, char *out, size_t cap);
/* What is still held back at the end (bytes of a character never finished). */
size_t detokenize_flush(struct detokenizer *d, char *out, size_t cap);

#endif
