/* pass_fuse.h: applies the fusion rules (fusion_rules.c) in table order,
 * each to every live node of its root op, in execution order. */
#ifndef MINFER_COMPILER_PASS_FUSE_H
#define MINFER_COMPILER_PASS_FUSE_H

#include "ir.h"

/* Returns the number of rewrites; per-rule counts go to counts[] if given. */
int pass_fuse(struct ir *ir, int *counts);

#endif
