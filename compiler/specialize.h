/* specialize.h: fixing an architecture's shape-defining hyperparameters to
 * one model's values (a named preset or a GGUF file's metadata), so the
 * emitter writes constants and the build refuses other shapes. */
#ifndef MINFER_COMPILER_SPECIALIZE_H
#define MINFER_COMPILER_SPECIALIZE_H

#include "error.h"
#include "ir.h"

/* what: a preset name, or a path ending in .gguf. */
int specialize(struct ir *ir, const char *what, struct error *e);

/* The architecture (description file stem) a preset or GGUF file needs,
 * into arch (n bytes). For a file this is its general.architecture. */
int specialize_arch(const char *what, char *arch, size_t n, struct error *e);

#endif
