/* test_quant_reference.c: minfer's types and GGUF reading against the Python
 * gguf package (tests/ref/check_*.py). This test fails, never skips, when python3
 * or the package is missing: the README's install step provides them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf_write.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "support.h"

#define NE0 512
#define ROWS 3

static const enum tensor_type decodable[] = { TYPE_F16,  TYPE_BF16, TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0,
                                              TYPE_Q5_1, TYPE_Q8_0, TYPE_Q2_K, TYPE_Q3_K, TYPE_Q4_K,
                                              TYPE_Q5_K, TYPE_Q6_K };
#define N_DECODABLE (sizeof decodable / sizeof decodable[0])

/* Where each block format keeps its f16 scale fields, so random blocks can
 * be given finite scales (random bits there would be NaN now and then). */
static void sane_scales(enum tensor_type t, uint8_t *block, struct rng *r)
{
    int at = -1, n = 0;
    switch (t) {
    case TYPE_Q4_0: case TYPE_Q5_0: case TYPE_Q8_0: at = 0; n = 1; break;
    case TYPE_Q4_1: case TYPE_Q5_1: case TYPE_Q4_K: case TYPE_Q5_K: at = 0; n = 2; break;
    case TYPE_Q2_K: at = 80; n = 2; break;
    case TYPE_Q3_K: at = 108; n = 1; break;
    case TYPE_Q6_K: at = 208; n = 1; break;
    default: break;
    }
    for (int i = 0; i < n; i++)
        store_f16(block + at + 2 * i, (float)(rng_uniform(r) * 0.1));
}

static void random_blocks(enum tensor_type t, uint8_t *out, size_t nbytes, struct rng *r)
{
    const struct type_info *ti = type_info(t);
    for (size_t i = 0; i < nbytes; i++)
        out[i] = (uint8_t)(rng_uniform(r) * 256);
    if (ti->block_elems == 1) { /* f16/bf16: random finite values */
        for (size_t i = 0; i < nbytes; i += 2)
            store_f16(out + i, (float)(rng_uniform(r) * 4 - 2));
        if (t == TYPE_BF16)
            for (size_t i = 0; i < nbytes; i += 2) {
                uint16_t h = f32_to_bf16(rng_normal(r));
                out[i] = (uint8_t)h;
                out[i + 1] = (uint8_t)(h >> 8);
            }
        return;
    }
    for (size_t b = 0; b < nbytes; b += ti->block_bytes)
        sane_scales(t, out + b, r);
}

struct owned {
    void *p[5 * N_DECODABLE]; /* src, q, deq, rnd, rdeq per type */
    int n;
};

static void *keep(struct owned *o, void *p)
{
    o->p[o->n++] = p;
    return p;
}

static void add(struct gguf_writer *w, const char *kind, enum tensor_type t, enum tensor_type stored,
                const void *data)
{
    char name[64];
    uint64_t ne[2] = { NE0, ROWS };
    struct error e;
    snprintf(name, sizeof name, "%s.%s", kind, type_name(t));
    cr_assert_eq(gguf_add_tensor(w, name, stored, 2, ne, data, &e), 0, "%s", e.msg);
}

static void add_type_table(struct gguf_writer *w)
{
    uint32_t rows[3 * 64];
    int n = 0;
    for (uint32_t id = 0; id < 64; id++) {
        const struct type_info *ti = type_info(id);
        if (ti) {
            rows[n++] = id;
            rows[n++] = ti->block_elems;
            rows[n++] = ti->block_bytes;
        }
    }
    gguf_set_arr(w, "minfer.type_table", GGUF_UINT32, (uint64_t)n, rows);
}

static const char *write_reference_file(struct owned *o)
{
    struct gguf_writer *w = gguf_writer_new();
    struct rng r;
    rng_seed(&r, 2024);
    add_type_table(w);
    for (size_t k = 0; k < N_DECODABLE; k++) {
        enum tensor_type t = decodable[k];
        size_t nbytes = type_bytes(t, NE0 * ROWS);
        if (type_can_quantize(t)) {
            float *src = keep(o, malloc(NE0 * ROWS * sizeof(float)));
            float *deq = keep(o, malloc(NE0 * ROWS * sizeof(float)));
            uint8_t *q = keep(o, malloc(nbytes));
            for (int i = 0; i < NE0 * ROWS; i++)
                src[i] = rng_normal(&r) * (i < NE0 ? 1.0f : i < 2 * NE0 ? 0.02f : 30.0f);
            cr_assert_eq(quantize_row(t, src, q, NE0 * ROWS), 0);
            cr_assert_eq(dequantize_row(t, q, deq, NE0 * ROWS), 0);
            add(w, "src", t, TYPE_F32, src);
            add(w, "q", t, t, q);
            add(w, "deq", t, TYPE_F32, deq);
        }
        uint8_t *rnd = keep(o, malloc(nbytes));
        float *rdeq = keep(o, malloc(NE0 * ROWS * sizeof(float)));
        random_blocks(t, rnd, nbytes, &r);
        cr_assert_eq(dequantize_row(t, rnd, rdeq, NE0 * ROWS), 0);
        add(w, "rnd", t, t, rnd);
        add(w, "rdeq", t, TYPE_F32, rdeq);
    }
    const char *path = temp_path(".gguf");
    struct error e;
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    return path;
}

Test(reference, every_type_matches_the_gguf_package, .timeout = 300)
{
    struct owned o = { .n = 0 };
    const char *path = write_reference_file(&o);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 %s/tests/ref/check_quants.py %s", src_dir(), path);
    int rc = run_cmd(cmd, &out);
    cr_log_info("%s", out);
    cr_assert_eq(rc, 0, "check_quants.py failed:\n%s", out);
    /* The script must actually have checked every type: count its lines. */
    for (size_t k = 0; k < N_DECODABLE; k++) {
        char line[96];
        snprintf(line, sizeof line, "%s dequantize (rnd): bit-identical", type_name(decodable[k]));
        cr_assert(strstr(out, line), "missing '%s' in:\n%s", line, out);
        if (type_can_quantize(decodable[k])) {
            snprintf(line, sizeof line, "%s dequantize (q): bit-identical", type_name(decodable[k]));
            cr_assert(strstr(out, line), "missing '%s' in:\n%s", line, out);
        }
    }
    static const char *encoded_by_gguf[] = { "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0" };
    for (size_t k = 0; k < sizeof encoded_by_gguf / sizeof encoded_by_gguf[0]; k++) {
        char line[96];
        snprintf(line, sizeof line, "%s quantize: identical bytes", encoded_by_gguf[k]);
        cr_assert(strstr(out, line), "missing '%s' in:\n%s", line, out);
    }
    cr_assert(strstr(out, "table Q6_K: matches") && strstr(out, "0 failures"), "%s", out);
    for (int i = 0; i < o.n; i++)
        free(o.p[i]);
    free(out);
}

static void check_info_against_gguf(const char *gguf_path)
{
    const char *json = temp_path(".json");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s info --json %s > %s", minfer_bin(), gguf_path, json);
    cr_assert_eq(run_cmd(cmd, NULL), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/ref/check_info.py %s %s", src_dir(), gguf_path, json);
    int rc = run_cmd(cmd, &out);
    cr_assert_eq(rc, 0, "check_info.py:\n%s", out);
    cr_assert(strstr(out, " 0 differences"), "%s", out);
    free(out);
}

Test(reference, info_json_matches_the_gguf_reader_on_every_value_type, .timeout = 120)
{
    struct gguf_writer *w = gguf_writer_new();
    gguf_set_str(w, "general.architecture", "testarch"); /* not a compiled one: info only reads it */
    gguf_set_u8(w, "t.u8", 255);
    gguf_set_i8(w, "t.i8", -128);
    gguf_set_u16(w, "t.u16", 65535);
    gguf_set_i16(w, "t.i16", -32768);
    gguf_set_u32(w, "testarch.block_count", 36);
    gguf_set_i32(w, "t.i32", -5);
    gguf_set_u64(w, "t.u64", UINT64_MAX);
    gguf_set_i64(w, "t.i64", INT64_MIN);
    gguf_set_f32(w, "testarch.rope.freq_base", 1000000.0f);
    gguf_set_f32(w, "t.f32_third", 1.0f / 3.0f);
    gguf_set_f64(w, "t.f64", -2.5e-300);
    gguf_set_bool(w, "t.bool", false);
    gguf_set_str(w, "t.str", "quote \" backslash \\ newline \n tab \t 漢字 🙂");
    float fs[3] = { 0.5f, -1e-20f, 3.25f };
    gguf_set_arr(w, "t.arr_f32", GGUF_FLOAT32, 3, fs);
    const char *strs[3] = { "Ġthe", "<|im_start|>", "" };
    gguf_set_str_arr(w, "tokenizer.ggml.tokens", 3, strs);
    gguf_set_u32(w, "general.alignment", 128);
    static uint8_t q[2 * 144];
    static float f[4 * 8];
    uint64_t ne_q[2] = { 256, 2 }, ne_f[3] = { 8, 2, 2 };
    struct error e;
    cr_assert_eq(gguf_add_tensor(w, "blk.0.attn_q.weight", TYPE_Q4_K, 2, ne_q, q, &e), 0);
    cr_assert_eq(gguf_add_tensor(w, "blk.0.x", TYPE_F32, 3, ne_f, f, &e), 0);
    const char *path = temp_path(".gguf");
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    check_info_against_gguf(path);
}

Test(reference, info_json_matches_the_gguf_reader_on_files_gguf_wrote, .timeout = 120)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus", src_dir());
    static const char *seeds[] = { "small_model.gguf", "metadata_only.gguf" };
    for (int i = 0; i < 2; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i]);
        check_info_against_gguf(path);
    }
}
