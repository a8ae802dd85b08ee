/* fusion_rules.h: the fusion patterns, declared as data in one table
 * (fusion_rules.c). Each rule looks at one node, the last of its pattern;
 * when the pattern matches it rewrites that node in place (so every reader
 * of it stays wired) and marks the nodes it absorbed dead. */
#ifndef MINFER_COMPILER_FUSION_RULES_H
#define MINFER_COMPILER_FUSION_RULES_H

#include <stdbool.h>

#include "ir.h"

struct fusion_rule {
    const char *name;
    int root_op;                              /* the op of the node the rule looks at */
    bool (*apply)(struct ir *ir, int node);   /* matches and rewrites; false if no match */
    const char *doc;
};

/* The rules in the order the fusion pass applies them. */
extern const struct fusion_rule fusion_rules[];
extern const int fusion_rule_count;

#endif
