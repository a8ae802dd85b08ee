/* spm.h: SentencePiece-style encoding of one piece of text (tokenizer.ggml.
 * model "llama": Llama 2, Mistral, Gemma), for tokenizer.c. */
#ifndef MINFER_TOKENIZER_SPM_H
#define MINFER_TOKENIZER_SPM_H

#include "tokenizer/tokenizer.h"

/* Encodes s (n bytes, spaces already written as U+2581): its characters
 * merged pairwise, the adjacent pair whose joined text is the token of the
 * highest score first (the leftmost on ties), until no pair is a token;
 * what is left that is not a token goes out as byte tokens (<0xXX>). */
int spm_encode(const struct tokenizer *t, const char *s, size_t n, int32_t **out, size_t *n_out, size_t *cap,
               struct error *e);

#endif
