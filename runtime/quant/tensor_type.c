/* tensor_type.c: lookups over the TENSOR_TYPES table (see tensor_type.h). */
#include "quant/tensor_type.h"

#include <stdio.h>
#include <strings.h>

static const struct type_info *lookup(uint32_t id)
{
    switch (id) {
#define TT_ROW(name, id, blk, bytes) \
    case id: { static const struct type_info row = { #name, blk, bytes }; return &row; }
        TENSOR_TYPES(TT_ROW)
#undef TT_ROW
    }
    return NULL;
}

const struct type_info *type_info(uint32_t id) { return lookup(id); }

const char *type_name(uint32_t id)
{
    static _Thread_local char unknown[24];
    const struct type_info *t = lookup(id);
    if (t)
        return t->name;
    snprintf(unknown, sizeof unknown, "type#%u", id);
    return unknown;
}

int type_from_name(const char *name, enum tensor_type *out)
{
    static const enum tensor_type all[] = {
#define TT_ID(name, id, blk, bytes) TYPE_##name,
        TENSOR_TYPES(TT_ID)
#undef TT_ID
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcasecmp(lookup(all[i])->name, name) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

size_t type_bytes(enum tensor_type t, uint64_t n)
{
    const struct type_info *ti = lookup(t);
    return (size_t)(n / ti->block_elems) * ti->block_bytes;
}

int type_can_dequantize(enum tensor_type t)
{
    switch (t) {
    case TYPE_F32: case TYPE_F16: case TYPE_BF16:
    case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1: case TYPE_Q8_0: case TYPE_Q8_1:
    case TYPE_Q2_K: case TYPE_Q3_K: case TYPE_Q4_K: case TYPE_Q5_K: case TYPE_Q6_K:
        return 1;
    default:
        return 0;
    }
}

int type_can_quantize(enum tensor_type t)
{
    switch (t) {
    case TYPE_F32: case TYPE_F16: case TYPE_BF16:
    case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1: case TYPE_Q8_0: case TYPE_Q8_1:
    case TYPE_Q4_K: case TYPE_Q5_K: case TYPE_Q6_K:
        return 1;
    default:
        return 0;
    }
}
