/* test_compiler.c: minfer-compile on the real descriptions and on broken
 * and tricky ones: IR sizes and shapes, where each fusion fires and where it
 * must not, malformed descriptions with their exact errors, deterministic
 * output, and that the committed generated/ is what the compiler makes. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

static int compile(char **out, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s", src_dir(), compile_bin(), args);
    return run_cmd(cmd, out);
}

/* The part of a --dump-ir listing after the line starting with title. */
static const char *section(const char *dump, const char *title)
{
    const char *s = strstr(dump, title);
    cr_assert_not_null(s, "no '%s' in the dump", title);
    return s;
}

static int count(const char *from, const char *to, const char *needle)
{
    int n = 0;
    for (const char *p = from; (p = strstr(p, needle)) && (!to || p < to); p += strlen(needle))
        n++;
    return n;
}

struct arch_expect {
    char arch[16];                      /* an array: parameters are copied into the test's process */
    int traced, fused;                  /* live nodes after tracing / after fusion */
    int qkv, head_norm_rope, norm_q8, residual, gate_up, bias, rope;
};

static struct arch_expect archs[] = {
    /* arch    traced fused qkv hnr q8 res g/u bias rope(plain) */
    { "qwen3", 30, 23, 1, 2, 3, 2, 1, 0, 0 },
    { "qwen2", 31, 23, 1, 0, 3, 2, 1, 3, 2 },
    { "llama", 28, 23, 1, 0, 3, 2, 1, 0, 2 },
};

ParameterizedTestParameters(compiler, ir_sizes_and_fusions)
{
    return cr_make_param_array(struct arch_expect, archs, sizeof archs / sizeof archs[0]);
}

ParameterizedTest(struct arch_expect *x, compiler, ir_sizes_and_fusions)
{
    char args[256], *out, want[96];
    snprintf(args, sizeof args, "archs/%s.lua --dump-ir", x->arch);
    cr_assert_eq(compile(&out, args), 0, "%s", out);
    const char *traced = section(out, "== after trace"), *fused = section(out, "== after fusion"),
               *planned = section(out, "== after memory plan");
    snprintf(want, sizeof want, "nodes: %d live of %d recorded", x->traced, x->traced);
    cr_assert(strstr(traced, want), "%s: want '%s' in\n%.2000s", x->arch, want, traced);
    snprintf(want, sizeof want, "nodes: %d live of %d recorded", x->fused, x->traced);
    cr_assert(strstr(fused, want), "%s: want '%s' in\n%.2000s", x->arch, want, fused);
    cr_assert_eq(count(fused, planned, " MATMUL_QKV "), x->qkv, "%s qkv", x->arch);
    cr_assert_eq(count(fused, planned, " PART "), 2 * x->qkv, "%s parts", x->arch);
    cr_assert_eq(count(fused, planned, " HEAD_NORM_ROPE "), x->head_norm_rope, "%s", x->arch);
    cr_assert_eq(count(fused, planned, " RMS_NORM_Q8 "), x->norm_q8, "%s", x->arch);
    cr_assert_eq(count(fused, planned, " RMS_NORM "), 0, "%s: an unfused norm", x->arch);
    cr_assert_eq(count(fused, planned, " MATMUL_ADD "), x->residual, "%s", x->arch);
    cr_assert_eq(count(fused, planned, " FFN_GLU "), x->gate_up, "%s", x->arch);
    cr_assert_eq(count(fused, planned, "[matmul_bias]"), 0, "%s: bias fusion is absorbed by qkv", x->arch);
    cr_assert_eq(count(fused, planned, " ROPE "), x->rope, "%s plain rope", x->arch);
    cr_assert_eq(count(fused, planned, " SILU "), 0, "%s", x->arch);
    cr_assert_eq(count(fused, planned, " ADD "), 0, "%s", x->arch);
    cr_assert_eq(count(traced, fused, " ADD_BIAS "), x->bias, "%s traced biases", x->arch);
    /* shapes, symbolically */
    cr_assert(strstr(traced, "ATTENTION      f32   [(n_head * head_dim), nt]"), "%s", x->arch);
    cr_assert(strstr(traced, "HEADS          f32   [head_dim, n_head_kv, nt]"), "%s", x->arch);
    cr_assert(strstr(fused, "FFN_GLU        f32   [n_ff, nt]"), "%s", x->arch);
    cr_assert(strstr(fused, "RMS_NORM_Q8    q8_1  [n_embd, nt]"), "%s", x->arch);
    cr_assert(strstr(fused, "MATMUL         f32   [n_vocab, n_out]"), "%s: logits of the tokens asked for", x->arch);
    cr_assert(strstr(traced, "%0   pre   POSITIONS      i32   [nt]") && strstr(traced, "%1   pre   KV_LEN         i32   [1]"),
              "%s: the graph inputs come first", x->arch);
    cr_assert(strstr(fused, "carried 0: %3 -> "), "%s", x->arch);
    free(out);
}

Test(compiler, fusions_leave_lookalikes_alone)
{
    char *out;
    cr_assert_eq(compile(&out, "tests/compiler/good/fusion_negative.lua --dump-ir"), 0, "%s", out);
    const char *fused = section(out, "== after fusion"), *planned = section(out, "== after memory plan");
    cr_assert(strstr(fused, "nodes: 15 live of 15 recorded"), "%s", fused);
    static const char *const absent[] = { "GLU", "MATMUL_QKV", "RMS_NORM_Q8", "MATMUL_ADD", "FFN_GLU",
                                          "[gate_mul]", "[gate_up_pair]", "[qkv]", "[norm_q8]", "[residual_epilogue]",
                                          "[matmul_bias]", "[head_norm_rope]" };
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        cr_assert_eq(count(fused, planned, absent[i]), 0, "'%s' appeared in\n%s", absent[i], fused);
    free(out);
}

Test(compiler, malformed_descriptions_give_their_exact_errors, .timeout = 120)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/compiler/bad", src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t len = strlen(ent->d_name);
        if (len < 5 || strcmp(ent->d_name + len - 4, ".lua"))
            continue;
        char path[1400], args[1500], want[1024] = "", *out;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        FILE *f = fopen(path, "r");
        cr_assert(f && fgets(want, sizeof want, f), "%s", path);
        fclose(f);
        cr_assert(strncmp(want, "-- expect: ", 11) == 0, "%s: first line must be '-- expect: ...'", path);
        snprintf(args, sizeof args, "tests/compiler/bad/%s", ent->d_name);
        int rc = compile(&out, args);
        cr_assert_eq(rc, 1, "%s exited %d:\n%s", ent->d_name, rc, out);
        char expected[1100];
        snprintf(expected, sizeof expected, "minfer-compile: %s", want + 11);
        cr_assert_str_eq(out, expected, "%s", ent->d_name);
        free(out);
        n++;
    }
    closedir(d);
    cr_assert_geq(n, 12, "only %d malformed descriptions", n);
}

static char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    p[fread(p, 1, (size_t)n, f)] = 0;
    fclose(f);
    return p;
}

static const char *const gen_files[] = { "arch.h", "model.c", "graph.c", "kernels_cpu.c", "kernels.cu" };

Test(compiler, output_is_deterministic_and_the_committed_copy_is_current)
{
    static const char *const names[] = { "qwen3", "qwen2", "llama" };
    for (int a = 0; a < 3; a++) {
        const char *d1 = temp_path(".gen"), *d2 = temp_path(".gen");
        char args[1024], *out;
        for (int k = 0; k < 2; k++) {
            snprintf(args, sizeof args, "archs/%s.lua --out %s", names[a], k ? d2 : d1);
            cr_assert_eq(compile(&out, args), 0, "%s", out);
            free(out);
        }
        for (size_t f = 0; f < sizeof gen_files / sizeof gen_files[0]; f++) {
            char p1[1024], p2[1024], pc[1024];
            snprintf(p1, sizeof p1, "%s/%s", d1, gen_files[f]);
            snprintf(p2, sizeof p2, "%s/%s", d2, gen_files[f]);
            snprintf(pc, sizeof pc, "%s/generated/%s/%s", src_dir(), names[a], gen_files[f]);
            char *t1 = slurp_file(p1), *t2 = slurp_file(p2), *tc = slurp_file(pc);
            cr_assert(t1 && t2 && strcmp(t1, t2) == 0, "%s differs between two compiles", p1);
            cr_assert(tc && strcmp(t1, tc) == 0,
                      "generated/%s/%s is not what the compiler makes now: run tools/update-generated.sh", names[a],
                      gen_files[f]);
            free(t1), free(t2), free(tc);
            remove(p1), remove(p2);
        }
        rmdir(d1), rmdir(d2);
    }
}

Test(compiler, dot_picture_shows_a_layer_before_and_after_fusion)
{
    const char *dot = temp_path(".dot");
    char args[1024], *out;
    snprintf(args, sizeof args, "archs/qwen3.lua --dot %s", dot);
    cr_assert_eq(compile(&out, args), 0, "%s", out);
    char *text = slurp_file(dot);
    cr_assert_not_null(text);
    cr_assert(strstr(text, "digraph \"qwen3\"") && strstr(text, "one layer before fusion") && strstr(text, "after fusion"));
    cr_assert(strstr(text, "MATMUL_QKV") && strstr(text, "SILU"), "both versions of the layer");
    free(text);
    free(out);
}

Test(compiler, specializing_fixes_the_shapes)
{
    const char *dir = temp_path(".gen");
    char args[1024], *out;
    snprintf(args, sizeof args, "--specialize qwen3-8b --prefix qwen3_8b --out %s", dir);
    cr_assert_eq(compile(&out, args), 0, "%s", out);
    free(out);
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels_cpu.c", dir);
    char *k = slurp_file(path);
    cr_assert(k && strstr(k, "{ OP_FFN_GLU, 4096, 12288, cpu_dot_4096 },") &&
              strstr(k, "{ OP_MATMUL_ADD, 12288, 4096, cpu_dot_12288 },") && strstr(k, "{ OP_MATMUL, 4096, 151936, cpu_dot_4096 },") &&
              strstr(k, "CPU_DOT_INSTANCE(12288)"), "%s", k);
    snprintf(path, sizeof path, "%s/kernels.cu", dir);
    char *cu = slurp_file(path);
    cr_assert(cu && strstr(cu, "CUDA_MATMUL_INSTANCE(4096)") && strstr(cu, "CUDA_MATMUL_INSTANCE(12288)") &&
              strstr(cu, "{ OP_MATMUL_ADD, 12288, 4096, cuda_matmul_k12288, { 0, 0, 0 }, { -1, -1, -1 } },") &&
              !strstr(cu, "CUDA_MATMUL_TYPED"), "a preset without a quant mix fixes no types:\n%s", cu);
    free(cu);
    /* with a quant mix, each launch's row sets and types too: Q4_K_M's Q6_K
     * V (and down) in some layers, the Q6_K output */
    snprintf(args, sizeof args, "--specialize qwen3-8b:q4_k_m --prefix qwen3_8b --out %s", dir);
    cr_assert_eq(compile(&out, args), 0, "%s", out);
    free(out);
    cu = slurp_file(path);
    cr_assert(cu && strstr(cu, ", 4096, TYPE_MIXED, 4096, 1024, 1024, TYPE_Q4_K, TYPE_Q4_K, TYPE_Q6_K)") &&
              strstr(cu, ", 4096, TYPE_Q4_K, 4096, 1024, 1024, TYPE_Q4_K, TYPE_Q4_K, TYPE_Q4_K)") &&
              strstr(cu, ", 4096, TYPE_Q4_K, 12288, 0, 0, TYPE_Q4_K, TYPE_Q4_K, -1)") &&
              strstr(cu, ", 12288, TYPE_Q6_K, 4096, 0, 0, TYPE_Q6_K, -1, -1)") &&
              strstr(cu, ", 4096, TYPE_Q6_K, 151936, 0, 0, TYPE_Q6_K, -1, -1)") &&
              strstr(cu, "{ OP_FFN_GLU, 4096, 12288, cuda_matmul_typed") && !strstr(cu, "CUDA_MATMUL_INSTANCE"),
              "a build that knows its types compiles no kernels for the row length alone:\n%s", cu);
    free(cu);
    cr_assert_eq(compile(&out, "--specialize qwen3-8b:q3_x --prefix x --out /tmp/never"), 1);
    cr_assert(strstr(out, "qwen3-8b:q3_x: unknown quant mix 'q3_x' (known: "), "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/model.c", dir);
    char *m = slurp_file(path);
    cr_assert(m && strstr(m, "hp_expect(&r, \"qwen3-8b\", \"n_embd\", \"qwen3.embedding_length\", hp->n_embd, 4096)"));
    cr_assert(m && !strstr(m, "hp_expect(&r, \"qwen3-8b\", \"n_ctx\""), "the context length is not a shape");
    free(k), free(m);
    cr_assert_eq(compile(&out, "--specialize qwen3-9000b --prefix x --out /tmp/never"), 1);
    cr_assert(strstr(out, "unknown preset 'qwen3-9000b'"), "%s", out);
    free(out);
}
