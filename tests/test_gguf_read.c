/* test_gguf_read.c: the reader on good files: every value type, nested
 * arrays, alignment, tensor geometry and data pointers, v2 and v3. */
#include <criterion/criterion.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "support.h"
#include "quant/tensor_type.h"

static const char *write_all_types(void)
{
    struct gguf_writer *w = gguf_writer_new();
    struct error e;
    gguf_set_u8(w, "t.u8", 200);
    gguf_set_i8(w, "t.i8", -100);
    gguf_set_u16(w, "t.u16", 60000);
    gguf_set_i16(w, "t.i16", -30000);
    gguf_set_u32(w, "t.u32", 4000000000u);
    gguf_set_i32(w, "t.i32", -2000000000);
    gguf_set_u64(w, "t.u64", 18000000000000000000ull);
    gguf_set_i64(w, "t.i64", -9000000000000000000ll);
    gguf_set_f32(w, "t.f32", 0.1f);
    gguf_set_f64(w, "t.f64", 0.1);
    gguf_set_bool(w, "t.bool", true);
    gguf_set_str(w, "t.str", "héllo");
    int16_t i16s[3] = { -1, 0, 1 };
    gguf_set_arr(w, "t.arr_i16", GGUF_INT16, 3, i16s);
    const char *strs[2] = { "a", "<|im_end|>" };
    gguf_set_str_arr(w, "t.arr_str", 2, strs);
    /* [[1, 2], [3]]: an array of two u32 arrays, encoded by hand. */
    struct buf b = { 0 };
    buf_u32(&b, GGUF_ARRAY);
    buf_u64(&b, 2);
    buf_u32(&b, GGUF_UINT32); buf_u64(&b, 2); buf_u32(&b, 1); buf_u32(&b, 2);
    buf_u32(&b, GGUF_UINT32); buf_u64(&b, 1); buf_u32(&b, 3);
    gguf_set_encoded(w, "t.nested", GGUF_ARRAY, b.p, b.n);
    buf_free(&b);
    gguf_set_u32(w, "general.alignment", 64);
    static float f[3 * 32];
    for (int i = 0; i < 96; i++)
        f[i] = (float)i;
    static uint8_t q[2 * 34];
    uint64_t ne_f[2] = { 32, 3 }, ne_q[1] = { 64 };
    cr_assert_eq(gguf_add_tensor(w, "a", TYPE_F32, 2, ne_f, f, &e), 0, "%s", e.msg);
    cr_assert_eq(gguf_add_tensor(w, "b", TYPE_Q8_0, 1, ne_q, q, &e), 0, "%s", e.msg);
    const char *path = temp_path(".gguf");
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    return path;
}

Test(gguf_read, every_value_type)
{
    const char *path = write_all_types();
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, path, &e), 0, "%s", e.msg);
    cr_assert_eq(g.version, 3);
    cr_assert_eq(gguf_find(&g, "t.u8")->value.u, 200);
    cr_assert_eq(gguf_find(&g, "t.i8")->value.i, -100);
    cr_assert_eq(gguf_find(&g, "t.u16")->value.u, 60000);
    cr_assert_eq(gguf_find(&g, "t.i16")->value.i, -30000);
    cr_assert_eq(gguf_find(&g, "t.u32")->value.u, 4000000000u);
    cr_assert_eq(gguf_find(&g, "t.i32")->value.i, -2000000000);
    cr_assert_eq(gguf_find(&g, "t.u64")->value.u, 18000000000000000000ull);
    cr_assert_eq(gguf_find(&g, "t.i64")->value.i, -9000000000000000000ll);
    cr_assert_eq(gguf_find(&g, "t.f32")->value.f, (double)0.1f);
    cr_assert_eq(gguf_find(&g, "t.f64")->value.f, 0.1);
    cr_assert_eq(gguf_find(&g, "t.bool")->value.u, 1);
    cr_assert(gguf_str_eq(gguf_find(&g, "t.str")->value.s, "héllo"));
    cr_assert_null(gguf_find(&g, "t.absent"));

    struct gguf_arr_iter it;
    struct gguf_value v;
    gguf_arr_begin(&it, &gguf_find(&g, "t.arr_i16")->value.a);
    for (int want = -1; want <= 1; want++) {
        cr_assert(gguf_arr_next(&it, &v));
        cr_assert_eq(v.type, GGUF_INT16);
        cr_assert_eq(v.i, want);
    }
    cr_assert_not(gguf_arr_next(&it, &v));

    gguf_arr_begin(&it, &gguf_find(&g, "t.arr_str")->value.a);
    cr_assert(gguf_arr_next(&it, &v) && gguf_str_eq(v.s, "a"));
    cr_assert(gguf_arr_next(&it, &v) && gguf_str_eq(v.s, "<|im_end|>"));

    const struct gguf_arr *nested = &gguf_find(&g, "t.nested")->value.a;
    cr_assert_eq(nested->type, GGUF_ARRAY);
    cr_assert_eq(nested->n, 2);
    gguf_arr_begin(&it, nested);
    uint64_t sums[2] = { 0, 0 }, counts[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        cr_assert(gguf_arr_next(&it, &v));
        struct gguf_arr_iter inner;
        struct gguf_value x;
        gguf_arr_begin(&inner, &v.a);
        while (gguf_arr_next(&inner, &x)) {
            sums[k] += x.u;
            counts[k]++;
        }
    }
    cr_assert(counts[0] == 2 && sums[0] == 3 && counts[1] == 1 && sums[1] == 3);
    gguf_free(&g);
}

Test(gguf_read, tensor_geometry_and_alignment)
{
    const char *path = write_all_types();
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, path, &e), 0, "%s", e.msg);
    cr_assert_eq(g.alignment, 64);
    cr_assert_eq(g.data_offset % 64, 0);
    const struct gguf_tensor *a = gguf_find_tensor(&g, "a"), *b = gguf_find_tensor(&g, "b");
    cr_assert(a && b);
    cr_assert_eq(a->n_dims, 2);
    cr_assert(a->ne[0] == 32 && a->ne[1] == 3 && a->ne[2] == 1 && a->n_elems == 96);
    cr_assert_eq(a->nbytes, 384);
    cr_assert_eq(b->nbytes, 68);
    cr_assert_eq(b->offset, 384); /* 384 is already a multiple of 64 */
    float f;
    memcpy(&f, a->data + 4 * 95, 4);
    cr_assert_eq(f, 95.0f);
    cr_assert_eq(gguf_find_tensor(&g, "c"), NULL);
    gguf_free(&g);
}

Test(gguf_read, version_2_file)
{
    struct buf b = { 0 };
    buf_u32(&b, GGUF_MAGIC);
    buf_u32(&b, 2);
    buf_u64(&b, 1);
    buf_u64(&b, 1);
    buf_str(&b, "general.architecture");
    buf_u32(&b, GGUF_STRING);
    buf_str(&b, "llama");
    buf_str(&b, "w");
    buf_u32(&b, 1);
    buf_u64(&b, 4);
    buf_u32(&b, TYPE_F32);
    buf_u64(&b, 0);
    buf_pad(&b, 32);
    float data[4] = { 1, 2, 3, 4 };
    buf_put(&b, data, sizeof data);
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_parse(&g, b.p, b.n, &e), 0, "%s", e.msg);
    cr_assert_eq(g.version, 2);
    struct gguf_str arch;
    cr_assert_eq(gguf_get_str(&g, "general.architecture", &arch, &e), 0);
    cr_assert(gguf_str_eq(arch, "llama"));
    uint32_t u;
    cr_assert_eq(gguf_get_u32(&g, "general.architecture", &u, &e), -1);
    cr_assert_str_eq(e.msg, "metadata 'general.architecture': expected uint32, got string");
    cr_assert_eq(gguf_get_u32(&g, "x.missing", &u, &e), -1);
    cr_assert_str_eq(e.msg, "metadata 'x.missing' is missing");
    gguf_free(&g);
    buf_free(&b);
}

Test(gguf_read, empty_file_list_of_nothing)
{
    struct buf b = { 0 };
    buf_u32(&b, GGUF_MAGIC);
    buf_u32(&b, 3);
    buf_u64(&b, 0);
    buf_u64(&b, 0);
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_parse(&g, b.p, b.n, &e), 0, "%s", e.msg);
    cr_assert(g.n_kv == 0 && g.n_tensors == 0);
    cr_assert_null(gguf_find(&g, "anything"));
    gguf_free(&g);
    buf_free(&b);
}

Test(gguf_read, open_errors_name_the_path)
{
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, "/nonexistent/model.gguf", &e), -1);
    cr_assert_str_eq(e.msg, "/nonexistent/model.gguf: cannot open: No such file or directory");
    cr_assert_eq(gguf_open(&g, "/tmp", &e), -1);
    cr_assert_str_eq(e.msg, "/tmp: not a regular file");
    const char *empty = write_temp("", 0, ".gguf");
    cr_assert_eq(gguf_open(&g, empty, &e), -1);
    cr_assert(strstr(e.msg, "too short for a GGUF header"), "%s", e.msg);
}
