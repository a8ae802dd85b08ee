/* pretokenize.h: splits text into the pieces byte-level BPE encodes one at
 * a time, by the Qwen2 pre-tokenizer expression
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * with its alternatives tried in order, as a backtracking regex engine
 * does. Each alternative is one re2c-compiled matcher over UTF-8 (Unicode
 * letter and number classes from re2c's standard library). A byte that is
 * not valid UTF-8 becomes a piece of its own. */
#ifndef MINFER_PRETOKENIZE_H
#define MINFER_PRETOKENIZE_H

#include <stddef.h>

/* Length in bytes of the piece starting at s (s < end; *end is readable and
 * must be a NUL sentinel). Always at least 1. */
size_t pretokenize_next(const char *s, const char *end);

#endif
