/* dump.h: human-readable views of the IR: a text listing (--dump-ir) and a
 * Graphviz picture of one layer (--dot). */
#ifndef MINFER_COMPILER_DUMP_H
#define MINFER_COMPILER_DUMP_H

#include <stdio.h>

#include "ir.h"

void dump_ir(FILE *f, const struct ir *ir, const char *title);

/* One digraph cluster per call; call with the layer before and after fusion. */
void dump_dot_begin(FILE *f, const struct ir *ir);
void dump_dot_layer(FILE *f, const struct ir *ir, const char *title, int cluster);
void dump_dot_end(FILE *f);

#endif
