/* pass_fuse.c: drives the fusion rules (see pass_fuse.h). */
#include "pass_fuse.h"

#include "fusion_rules.h"

int pass_fuse(struct ir *ir, int *counts)
{
    int total = 0;
    for (int r = 0; r < fusion_rule_count; r++) {
        int fired = 0;
        for (int i = 0; i < ir->n_node; i++)
            if (!ir->node[i].dead && ir->node[i].op == fusion_rules[r].root_op && fusion_rules[r].apply(ir, i))
                fired++;
        if (counts)
            counts[r] = fired;
        total += fired;
    }
    return total;
}
