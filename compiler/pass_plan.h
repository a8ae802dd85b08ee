/* pass_plan.h: the activation memory plan. Every node that writes a buffer
 * gets an arena slot; a slot is reused once every reader of its previous
 * occupant has run (liveness over the pre-loop, one layer, and post-loop
 * sequence; a value made before the loop and read inside it stays live for
 * the whole loop). A value carried from layer to layer keeps one slot that
 * nothing else in the loop touches. Slot sizes are C expressions of the
 * hyperparameters and nt, so the runtime sizes the arena once per shape. */
#ifndef MINFER_COMPILER_PASS_PLAN_H
#define MINFER_COMPILER_PASS_PLAN_H

#include "error.h"
#include "ir.h"

#define PLAN_MAX_SLOTS 32

struct plan {
    int n_slots;
    char size[PLAN_MAX_SLOTS][1024]; /* C expression of bytes, before alignment */
};

int pass_plan(struct ir *ir, struct plan *p, struct error *e);

/* The node whose buffer n reads (itself unless n is a view or a CARRY). */
int plan_root(const struct ir *ir, int n);

#endif
