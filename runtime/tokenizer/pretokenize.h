/* pretokenize.h: splits text into the pieces byte-level BPE encodes one at
 * a time, by the Qwen2 pre-tokenizer expression
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * or Llama 3's, which is the same but for \p{N}{1,3} (digits in threes),
 * with its alternatives tried in order, as a backtracking regex engine
 * does. Each alternative is one re2c-compiled matcher over UTF-8 (Unicode
 * letter and number classes from re2c's standard library). A byte that is
 * not valid UTF-8 becomes a piece of its own. */
#ifndef MINFER_PRETOKENIZE_H
#define MINFER_PRETOKENIZE_H

#include <stddef.h>

enum pretokenizer {
    PRE_QWEN2,   /* tokenizer.ggml.pre "qwen2" */
    PRE_LLAMA3,  /* "llama-bpe" */
};

/* Length in bytes of the piece starting at s (s < end; *end is readable and
 * must be a NUL sentinel). Always at least 1. */
size_t pretokenize_next(enum pretokenizer kind, const char *s, const char *end);

#endif
