/* specialize.h: fixing an architecture's shape-defining hyperparameters to
 * one model's values (a named preset or a GGUF file's metadata), so the
 * emitter writes constants and the build refuses other shapes. */
#ifndef MINFER_COMPILER_SPECIALIZE_H
#define MINFER_COMPILER_SPECIALIZE_H

#include "error.h"
#include "ir.h"

/* what: a preset name, or a path ending in .gguf. */
int specialize(struct ir *ir, const char *what, struct error *e);

/* How generated code names the model in its messages (n bytes at out): a
 * file by its file name, not its path; a preset by its name, not its quant
 * mix, which the binary does not require (other types run the generic
 * kernels on the GPU). */
void specialize_label(const char *what, char *out, size_t n);

/* The architecture (description file stem) a preset or GGUF file needs,
 * into arch (n bytes). For a file this is its general.architecture. */
int specialize_arch(const char *what, char *arch, size_t n, struct error *e);

#endif
