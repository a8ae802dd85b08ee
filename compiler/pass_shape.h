/* pass_shape.h: shape and type inference and checking. Gives every node its
 * symbolic shape and activation type from its sources and weights, and
 * refuses any mismatch with the description's file:line, what the op
 * expected and what it got. Run after tracing and again after fusion. */
#ifndef MINFER_COMPILER_PASS_SHAPE_H
#define MINFER_COMPILER_PASS_SHAPE_H

#include "error.h"
#include "ir.h"

int pass_shape(struct ir *ir, struct error *e);

#endif
