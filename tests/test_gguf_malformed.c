/* test_gguf_malformed.c: hostile and broken GGUF files. Each case builds the
 * bytes of one defect and names the exact error the reader must give. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "gguf/gguf.h"
#include "support.h"
#include "quant/tensor_type.h"

static void header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    buf_u32(b, GGUF_MAGIC);
    buf_u32(b, version);
    buf_u64(b, n_tensors);
    buf_u64(b, n_kv);
}

static void kv_u32(struct buf *b, const char *key, uint32_t v)
{
    buf_str(b, key);
    buf_u32(b, GGUF_UINT32);
    buf_u32(b, v);
}

static void tinfo(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    buf_str(b, name);
    buf_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        buf_u64(b, ne[i]);
    buf_u32(b, type);
    buf_u64(b, off);
}

/* A well-formed file with one F32 tensor of ne0 floats, given a tensor info. */
static void one_tensor(struct buf *b, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off,
                       size_t data_bytes)
{
    header(b, 3, 1, 0);
    tinfo(b, "w", n_dims, ne, type, off);
    buf_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        buf_u8(b, 0);
}

static const uint64_t NE4[1] = { 4 };

static void too_short(struct buf *b) { buf_put(b, "GGU", 3); }
static void bad_magic(struct buf *b) { buf_put(b, "GGML", 4); buf_u32(b, 3); buf_u64(b, 0); buf_u64(b, 0); }
static void version_1(struct buf *b) { header(b, 1, 0, 0); }
static void version_4(struct buf *b) { header(b, 4, 0, 0); }
static void big_endian(struct buf *b) { header(b, 0x03000000u, 0, 0); }
static void truncated_counts(struct buf *b) { buf_u32(b, GGUF_MAGIC); buf_u32(b, 3); buf_u32(b, 0); }
static void absurd_kv_count(struct buf *b) { header(b, 3, 0, 1ull << 60); }
static void absurd_tensor_count(struct buf *b) { header(b, 3, 1ull << 60, 0); }

static void key_past_end(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_u64(b, 1000);
    buf_put(b, "abcdefghijklmnop", 16);
}

static void empty_key(struct buf *b) { header(b, 3, 0, 1); kv_u32(b, "", 1); }

static void key_with_nul(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_u64(b, 3);
    buf_put(b, "a\0b", 3);
    buf_u32(b, GGUF_UINT32);
    buf_u32(b, 0);
}

static void duplicate_key(struct buf *b) { header(b, 3, 0, 2); kv_u32(b, "a.b", 1); kv_u32(b, "a.b", 2); }

static void unknown_value_type(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, 13);
    buf_u64(b, 0);
}

static void bool_not_0_or_1(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_BOOL);
    buf_u8(b, 2);
}

static void truncated_value(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_UINT64);
    buf_put(b, "\1\2\3", 3);
}

static void oversized_string(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_STRING);
    buf_u64(b, UINT64_MAX);
    buf_put(b, "xyz", 3);
}

static void array_unknown_elem(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_ARRAY);
    buf_u32(b, 99);
    buf_u64(b, 1);
}

static void array_count_overflow(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_ARRAY);
    buf_u32(b, GGUF_UINT64);
    buf_u64(b, 1ull << 62);
    buf_u64(b, 7);
}

static void array_strings_absurd(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "tokenizer.ggml.tokens");
    buf_u32(b, GGUF_ARRAY);
    buf_u32(b, GGUF_STRING);
    buf_u64(b, 1ull << 40);
    buf_str(b, "a");
}

static void nested_too_deep(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "a.b");
    buf_u32(b, GGUF_ARRAY);
    for (int i = 0; i < 9; i++) {
        buf_u32(b, GGUF_ARRAY);
        buf_u64(b, 1);
    }
    buf_u32(b, GGUF_UINT8);
    buf_u64(b, 0);
}

static void alignment_wrong_type(struct buf *b)
{
    header(b, 3, 0, 1);
    buf_str(b, "general.alignment");
    buf_u32(b, GGUF_STRING);
    buf_str(b, "32");
}

static void alignment_not_pow2(struct buf *b) { header(b, 3, 0, 1); kv_u32(b, "general.alignment", 48); }
static void alignment_zero(struct buf *b) { header(b, 3, 0, 1); kv_u32(b, "general.alignment", 0); }

static void tensor_name_empty(struct buf *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "", 1, NE4, TYPE_F32, 0);
    buf_pad(b, 32);
    for (int i = 0; i < 16; i++)
        buf_u8(b, 0);
}

static void tensor_name_too_long(struct buf *b)
{
    char name[66];
    memset(name, 'x', 65);
    name[65] = 0;
    header(b, 3, 1, 0);
    tinfo(b, name, 1, NE4, TYPE_F32, 0);
}

static void duplicate_tensor(struct buf *b)
{
    header(b, 3, 2, 0);
    tinfo(b, "w", 1, NE4, TYPE_F32, 0);
    tinfo(b, "w", 1, NE4, TYPE_F32, 32);
    buf_pad(b, 32);
    for (int i = 0; i < 64; i++)
        buf_u8(b, 0);
}

static void zero_dims(struct buf *b) { one_tensor(b, 0, NE4, TYPE_F32, 0, 16); }

static void five_dims(struct buf *b)
{
    static const uint64_t ne[5] = { 1, 1, 1, 1, 1 };
    one_tensor(b, 5, ne, TYPE_F32, 0, 16);
}

static void zero_dimension(struct buf *b)
{
    static const uint64_t ne[2] = { 4, 0 };
    one_tensor(b, 2, ne, TYPE_F32, 0, 16);
}

static void element_overflow(struct buf *b)
{
    static const uint64_t ne[2] = { 1ull << 32, 1ull << 32 };
    one_tensor(b, 2, ne, TYPE_F32, 0, 16);
}

static void byte_size_overflow(struct buf *b)
{
    static const uint64_t ne[2] = { 1ull << 31, 1ull << 31 };
    one_tensor(b, 2, ne, TYPE_F64, 0, 16);
}

static void unknown_tensor_type(struct buf *b) { one_tensor(b, 1, NE4, 4, 0, 16); }

static void row_not_block_multiple(struct buf *b)
{
    static const uint64_t ne[1] = { 48 };
    one_tensor(b, 1, ne, TYPE_Q4_0, 0, 64);
}

static void misaligned_offset(struct buf *b) { one_tensor(b, 1, NE4, TYPE_F32, 4, 32); }
static void data_past_end(struct buf *b) { one_tensor(b, 1, NE4, TYPE_F32, 0, 15); }
static void offset_past_end(struct buf *b) { one_tensor(b, 1, NE4, TYPE_F32, 1ull << 40, 16); }

static void overlapping_tensors(struct buf *b)
{
    static const uint64_t ne[1] = { 16 };
    header(b, 3, 2, 0);
    tinfo(b, "first", 1, ne, TYPE_F32, 0);
    tinfo(b, "second", 1, NE4, TYPE_F32, 32);
    buf_pad(b, 32);
    for (int i = 0; i < 64; i++)
        buf_u8(b, 0);
}

static void data_section_missing(struct buf *b)
{
    header(b, 3, 1, 0);
    tinfo(b, "w", 1, NE4, TYPE_F32, 0); /* file ends mid-way to the aligned data start */
}

static void truncated_tensor_info(struct buf *b)
{
    header(b, 3, 1, 0);
    buf_str(b, "w");
    buf_u32(b, 2);
    buf_u64(b, 4);
    buf_u64(b, 4);
    buf_u32(b, TYPE_F32);
    buf_u32(b, 0); /* half of the u64 offset */
}

struct malformed {
    const char *name;
    void (*build)(struct buf *);
    const char *expect; /* the whole message, or its start when it ends in '*' */
};

static struct malformed cases[] = {
    { "too short", too_short, "truncated file: 3 bytes is too short for a GGUF header" },
    { "bad magic", bad_magic, "not a GGUF file: magic is 0x4c4d4747, expected 0x46554747 (\"GGUF\")" },
    { "version 1", version_1, "unsupported GGUF version 1 (supported: 2, 3)" },
    { "version 4", version_4, "unsupported GGUF version 4 (supported: 2, 3)" },
    { "big endian", big_endian, "big-endian GGUF (version 0x03000000) is not supported" },
    { "truncated counts", truncated_counts, "truncated file: tensor count needs 8 bytes at offset 8, 4 remain" },
    { "absurd kv count", absurd_kv_count, "metadata count 1152921504606846976 is impossible in 0 remaining bytes" },
    { "absurd tensor count", absurd_tensor_count, "tensor count 1152921504606846976 is impossible in 0 remaining bytes" },
    { "key past end", key_past_end, "metadata entry 0: string length 1000 exceeds the 16 bytes left in the file" },
    { "empty key", empty_key, "metadata entry 0: empty key" },
    { "key with NUL", key_with_nul, "metadata entry 0: key contains a NUL byte" },
    { "duplicate key", duplicate_key, "metadata 'a.b': duplicate key" },
    { "unknown value type", unknown_value_type, "metadata 'a.b': unknown value type 13" },
    { "bool not 0/1", bool_not_0_or_1, "metadata 'a.b': bool value 2 is neither 0 nor 1" },
    { "truncated value", truncated_value, "truncated file: metadata 'a.b' needs 8 bytes at offset 39, 3 remain" },
    { "oversized string", oversized_string,
      "metadata 'a.b': string length 18446744073709551615 exceeds the 3 bytes left in the file" },
    { "array unknown element", array_unknown_elem, "metadata 'a.b': unknown array element type 99" },
    { "array count overflow", array_count_overflow,
      "metadata 'a.b': array of 4611686018427387904 uint64 elements exceeds the 8 bytes left in the file" },
    { "string array absurd", array_strings_absurd,
      "metadata 'tokenizer.ggml.tokens': array of 1099511627776 string elements exceeds the 9 bytes left in the file" },
    { "nested too deep", nested_too_deep, "metadata 'a.b': arrays nested deeper than 8" },
    { "alignment type", alignment_wrong_type, "metadata 'general.alignment': expected uint32, got string" },
    { "alignment 48", alignment_not_pow2, "metadata 'general.alignment': 48 is not a power of two" },
    { "alignment 0", alignment_zero, "metadata 'general.alignment': 0 is not a power of two" },
    { "empty tensor name", tensor_name_empty, "tensor 0: empty name" },
    { "long tensor name", tensor_name_too_long, "tensor 0: name length 65 exceeds 64" },
    { "duplicate tensor", duplicate_tensor, "tensor 'w': duplicate tensor name" },
    { "zero dims", zero_dims, "tensor 'w': 0 dimensions (must be 1..4)" },
    { "five dims", five_dims, "tensor 'w': 5 dimensions (must be 1..4)" },
    { "zero dimension", zero_dimension, "tensor 'w': dimension 1 is zero" },
    { "element overflow", element_overflow, "tensor 'w': element count overflows at dimension 1 (4294967296)" },
    { "byte size overflow", byte_size_overflow, "tensor 'w': byte size overflows" },
    { "unknown tensor type", unknown_tensor_type, "tensor 'w': unknown tensor type id 4" },
    { "row not block multiple", row_not_block_multiple,
      "tensor 'w': row length 48 is not a multiple of the Q4_0 block size 32" },
    { "misaligned offset", misaligned_offset, "tensor 'w': data offset 4 is not a multiple of the alignment 32" },
    { "data past end", data_past_end,
      "tensor 'w': data [0, +16) extends past the end of the file (15 data bytes)" },
    { "offset past end", offset_past_end,
      "tensor 'w': data [1099511627776, +16) extends past the end of the file (16 data bytes)" },
    { "overlap", overlapping_tensors, "tensor 'second': data at offset 32 overlaps tensor 'first' [0, +64)" },
    { "data section missing", data_section_missing,
      "truncated file: data section starts at 64, past the end (57 bytes)" },
    { "truncated tensor info", truncated_tensor_info,
      "truncated file: tensor 'w' needs 8 bytes at offset 57, 4 remain" },
};

#define N_CASES (sizeof cases / sizeof cases[0])

/* Parameters are indices: Criterion runs each test in a fresh process where
 * function pointers copied from the parent would not be valid. */
ParameterizedTestParameters(gguf_malformed, refused_with_its_error)
{
    static size_t index[N_CASES];
    for (size_t i = 0; i < N_CASES; i++)
        index[i] = i;
    return cr_make_param_array(size_t, index, N_CASES);
}

ParameterizedTest(size_t *i, gguf_malformed, refused_with_its_error)
{
    const struct malformed *c = &cases[*i];
    struct buf b = { 0 };
    c->build(&b);
    struct gguf g;
    struct error e = { "" };
    /* Parse an exact-size heap copy so ASan sees any read past the end. */
    uint8_t *copy = malloc(b.n ? b.n : 1);
    memcpy(copy, b.p, b.n);
    int rc = gguf_parse(&g, copy, b.n, &e);
    cr_assert_eq(rc, -1, "case '%s' was accepted", c->name);
    cr_assert_str_eq(e.msg, c->expect, "case %s: got \"%s\", want \"%s\"", c->name, e.msg, c->expect);
    cr_assert_null(g.kv, "case '%s' left state behind", c->name);
    free(copy);
    buf_free(&b);
}

Test(gguf_malformed, at_least_25_cases)
{
    cr_assert_geq(N_CASES, 25);
}

Test(gguf_malformed, every_truncation_of_a_good_file_is_refused)
{
    struct buf b = { 0 };
    static const uint64_t ne[1] = { 8 };
    header(&b, 3, 1, 2);
    kv_u32(&b, "a.b", 7);
    buf_str(&b, "c.d");
    buf_u32(&b, GGUF_STRING);
    buf_str(&b, "text");
    tinfo(&b, "w", 1, ne, TYPE_F32, 0);
    buf_pad(&b, 32);
    for (int i = 0; i < 32; i++)
        buf_u8(&b, (uint8_t)i);
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_parse(&g, b.p, b.n, &e), 0, "%s", e.msg);
    gguf_free(&g);
    for (size_t n = 0; n < b.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        cr_assert_eq(gguf_parse(&g, copy, n, &e), -1, "prefix of %zu bytes accepted", n);
        cr_assert(strlen(e.msg) > 0 && !strchr(e.msg, '\n'));
        free(copy);
    }
    buf_free(&b);
}
