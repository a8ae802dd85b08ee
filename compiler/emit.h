/* emit.h: writes the generated C for an architecture (arch.h, model.c,
 * graph.c, kernels.c in one folder) and the registry of architectures, by
 * filling the templates in templates/. Output depends only on the inputs,
 * byte for byte. A file is rewritten only when its contents change. */
#ifndef MINFER_COMPILER_EMIT_H
#define MINFER_COMPILER_EMIT_H

#include "error.h"
#include "ir.h"
#include "pass_plan.h"

/* prefix names the generated symbols and folder: the architecture's name,
 * or a preset's for a specialized build (hyperparameters marked fixed in
 * the IR become constants). */
int emit_arch(const struct ir *ir, const struct plan *plan, const char *prefix, const char *preset,
              const char *templates, const char *outdir, struct error *e);

int emit_registry(const char *const *prefixes, int n, const char *templates, const char *outfile, struct error *e);

#endif
