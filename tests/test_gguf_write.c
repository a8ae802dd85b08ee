/* test_gguf_write.c: the writer: replace-in-place keys, copying values from
 * a parsed file, determinism, streaming checks, no half-written files. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "support.h"
#include "quant/tensor_type.h"

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(*n);
    cr_assert_eq(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static const char *write_small(void)
{
    static float data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
    uint64_t ne[1] = { 8 };
    struct error e;
    struct gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "qwen3");
    gguf_set_u32(w, "qwen3.block_count", 1);
    gguf_set_u32(w, "qwen3.block_count", 36); /* replaces, keeps position */
    cr_assert_eq(gguf_add_tensor(w, "x", TYPE_F32, 1, ne, data, &e), 0);
    const char *path = temp_path(".gguf");
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    return path;
}

Test(gguf_write, replaced_key_keeps_its_place)
{
    const char *path = write_small();
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, path, &e), 0, "%s", e.msg);
    cr_assert_eq(g.n_kv, 2);
    cr_assert(gguf_str_eq(g.kv[1].key, "qwen3.block_count"));
    cr_assert_eq(g.kv[1].value.u, 36);
    gguf_free(&g);
}

Test(gguf_write, same_input_gives_identical_bytes)
{
    const char *a = write_small(), *b = write_small();
    size_t na, nb;
    uint8_t *pa = slurp(a, &na), *pb = slurp(b, &nb);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(pa, pb, na), 0);
    free(pa);
    free(pb);
}

Test(gguf_write, copying_every_value_of_a_file_reproduces_it)
{
    const char *path = write_small();
    struct gguf g;
    struct error e;
    cr_assert_eq(gguf_open(&g, path, &e), 0, "%s", e.msg);
    struct gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g.n_kv; i++) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)g.kv[i].key.n, g.kv[i].key.p);
        cr_assert_eq(gguf_set_value(w, key, &g.kv[i].value), 0);
    }
    const struct gguf_tensor *t = &g.tensors[0];
    cr_assert_eq(gguf_add_tensor(w, "x", t->type, t->n_dims, t->ne, t->data, &e), 0);
    const char *copy = temp_path(".gguf");
    cr_assert_eq(gguf_write_file(w, copy, &e), 0, "%s", e.msg);
    size_t na, nb;
    uint8_t *pa = slurp(path, &na), *pb = slurp(copy, &nb);
    cr_assert(na == nb && memcmp(pa, pb, na) == 0);
    free(pa);
    free(pb);
    gguf_writer_free(w);
    gguf_free(&g);
}

Test(gguf_write, streaming_checks_sizes_and_leaves_no_file_on_failure)
{
    uint64_t ne[1] = { 32 };
    struct error e;
    struct gguf_writer *w = gguf_writer_new();
    cr_assert_eq(gguf_add_tensor(w, "q", TYPE_Q8_0, 1, ne, NULL, &e), 0);
    const char *path = temp_path(".gguf");
    cr_assert_eq(gguf_write_begin(w, path, &e), 0, "%s", e.msg);
    uint8_t block[34] = { 0 };
    cr_assert_eq(gguf_write_data(w, block, 33, &e), -1);
    cr_assert_str_eq(e.msg, "tensor 'q': 33 data bytes given, 34 expected");
    cr_assert_eq(gguf_write_end(w, &e), -1);
    cr_assert(strstr(e.msg, "0 of 1 tensors were written"), "%s", e.msg);
    gguf_writer_free(w);
    cr_assert_neq(access(path, F_OK), 0, "a failed write left %s behind", path);
}

Test(gguf_write, refuses_bad_tensor_declarations)
{
    struct error e;
    struct gguf_writer *w = gguf_writer_new();
    uint64_t ne[2] = { 48, 2 };
    cr_assert_eq(gguf_add_tensor(w, "a", TYPE_Q4_K, 2, ne, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "tensor 'a': row length 48 is not a multiple of the Q4_K block size 256");
    cr_assert_eq(gguf_add_tensor(w, "a", 4, 2, ne, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "tensor 'a': unknown type id 4");
    cr_assert_eq(gguf_add_tensor(w, "a", TYPE_F32, 2, ne, NULL, &e), 0);
    cr_assert_eq(gguf_add_tensor(w, "a", TYPE_F32, 2, ne, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "tensor 'a': declared twice");
    cr_assert_eq(gguf_write_file(w, "/tmp/never.gguf", &e), -1);
    cr_assert_str_eq(e.msg, "tensor 'a': no data given");
    gguf_writer_free(w);
}
