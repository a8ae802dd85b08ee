/* test_real_model.c: minfer on real models against llama.cpp, a reference
 * no one here wrote. tests/ref/llama_reference.py recorded, with
 * llama-cpp-python, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) and Gemma 3 270M
 * (Q4_K_M) on four texts with teacher forcing (llama.cpp's tokens and its
 * top-20 logits at each of 64 positions), sixteen greedy tokens after a
 * chat prompt, and the perplexity over the GPL-3 text (Gemma's in windows
 * of 1024, twice its sliding window); and, for Gemma, transformers' logits
 * on the same tokens (tests/ref/transformers_gemma.py). This suite needs the models
 * (tools/fetch-model.sh, run by tools/test.sh); it is its own binary, run
 * on the release build only. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "model.h"
#include "support.h"
#include "tokenizer/tokenizer.h"

#define POSITIONS 64
#define TOP 20
#define MAX_PROMPTS 4

struct top_entry {
    int32_t id;
    float logit;
};

struct prompt {
    char name[32];
    char *text;
    int32_t ids[POSITIONS];
    float lse[POSITIONS];                /* log-sum-exp of llama.cpp's logits at each position */
    struct top_entry top[POSITIONS][TOP]; /* llama.cpp's best 20, best first */
};

/* One model's fixture, and where the model is. */
struct reference {
    const char *fixture;  /* under tests/fixtures/data */
    const char *env;      /* the variable that may name the model file */
    char model[256];
    long long bytes;
    struct prompt p[MAX_PROMPTS];
    int n_prompts;
    int32_t greedy_prompt[512], greedy[64];
    int n_greedy_prompt, n_greedy;
    int ppl_ctx, ppl_windows;
    double ppl, ppl_err;
    enum kv_type kv;      /* the KV cache llama.cpp had (f16 unless the model line says) */
};

/* The references: llama.cpp on both models, and for Gemma also
 * transformers (tests/ref/transformers_gemma.py, on the H200: the GGUF's
 * own weights dequantized, float32, eager attention; teacher-forced over
 * the llama.cpp fixture's tokens; no greedy or perplexity records). */
static struct reference refs[] = {
    { .fixture = "qwen2.5-coder-0.5b.llama.txt", .env = "MINFER_MODEL" },
    { .fixture = "gemma-3-270m.llama.txt", .env = "MINFER_GEMMA" },
    { .fixture = "gemma-3-270m.transformers.txt", .env = "MINFER_GEMMA" },
};
#define MARGIN 0.5 /* logits between the reference's two best beyond which the argmax must agree */
#define N_MODELS 2 /* the models with greedy and perplexity records (refs 0 and 1) */

static struct reference ref;

static void read_fixture(int model)
{
    char path[1024];
    ref = refs[model];
    snprintf(path, sizeof path, "%s/tests/fixtures/data/%s", src_dir(), ref.fixture);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char line[512], kv[8] = "f16";
    cr_assert_not_null(fgets(line, sizeof line, f), "%s: model line", path);
    cr_assert_geq(sscanf(line, "model %255s %lld %*s kv %7s", ref.model, &ref.bytes, kv), 2, "%s: model line", path);
    cr_assert(strcmp(kv, "f16") == 0 || strcmp(kv, "f32") == 0, "%s: KV cache type %s", path, kv);
    ref.kv = strcmp(kv, "f32") == 0 ? KV_F32 : KV_F16;
    char word[32];
    while (fscanf(f, "%31s", word) == 1) {
        if (strcmp(word, "prompt") == 0) {
            cr_assert_lt(ref.n_prompts, MAX_PROMPTS);
            struct prompt *p = &ref.p[ref.n_prompts++];
            int len, n;
            cr_assert_eq(fscanf(f, "%31s %d %d", p->name, &len, &n), 3);
            cr_assert_eq(n, POSITIONS);
            cr_assert_eq(fgetc(f), '\n');
            p->text = calloc((size_t)len + 1, 1);
            cr_assert_eq(fread(p->text, 1, (size_t)len, f), (size_t)len);
            for (int i = 0; i < POSITIONS; i++)
                cr_assert_eq(fscanf(f, "%d", &p->ids[i]), 1);
            for (int i = 0; i < POSITIONS; i++) {
                cr_assert_eq(fscanf(f, "%f", &p->lse[i]), 1);
                for (int k = 0; k < TOP; k++)
                    cr_assert_eq(fscanf(f, "%d %f", &p->top[i][k].id, &p->top[i][k].logit), 2);
            }
        } else if (strcmp(word, "greedy") == 0) {
            cr_assert_eq(fscanf(f, "%d", &ref.n_greedy_prompt), 1);
            cr_assert_leq(ref.n_greedy_prompt, 512);
            for (int i = 0; i < ref.n_greedy_prompt; i++)
                cr_assert_eq(fscanf(f, "%d", &ref.greedy_prompt[i]), 1);
            cr_assert_eq(fscanf(f, "%d", &ref.n_greedy), 1);
            cr_assert_leq(ref.n_greedy, 64);
            for (int i = 0; i < ref.n_greedy; i++)
                cr_assert_eq(fscanf(f, "%d", &ref.greedy[i]), 1);
        } else if (strcmp(word, "perplexity") == 0) {
            cr_assert_eq(fscanf(f, "%*s %d %d %lf %lf", &ref.ppl_ctx, &ref.ppl_windows, &ref.ppl, &ref.ppl_err), 4);
            fscanf(f, "%*[^\n]");
        } else {
            cr_assert_fail("%s: unknown record '%s'", path, word);
        }
    }
    fclose(f);
    cr_assert_eq(ref.n_prompts, MAX_PROMPTS);
}

/* The model: models/ under the source tree, or the reference's variable. */
static const char *model_path(void)
{
    static char path[1024];
    const char *env = getenv(ref.env);
    if (env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/models/%s", src_dir(), ref.model);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s is missing: tools/fetch-model.sh fetches it", path);
    cr_assert_eq((long long)st.st_size, ref.bytes, "%s has %lld bytes, the fixture was made from %lld", path,
                 (long long)st.st_size, ref.bytes);
    return path;
}

TestSuite(real_model, .timeout = 600);

/* What each test runs on: a reference and a CPU device, the f32 reference
 * or the fast path (Q8_1 activations, as llama.cpp's CPU path has too);
 * the share of teacher-forced positions whose argmax must equal the
 * reference's (beside: equal wherever the reference leads by MARGIN), and
 * the bound on the mean KL over the reference's top 20, with room for a
 * different summation order above what was measured on the 2-core VM
 * (Qwen, 2026-11-29: 1.3e-3 and 1.5e-3; Gemma, 2026-11-30: 5.5e-3 and
 * 6.8e-3 against llama.cpp, -6.8e-9 (f32) and 2.4e-3 against transformers).
 * Gemma 3 270M is far more sensitive to rounding than Qwen: its 262,144
 * logits crowd the top. llama.cpp itself, with an f16 KV cache instead of
 * f32, keeps its own argmax at only 241 of the 256 positions, and agrees
 * with transformers at 243; minfer's f32 path agrees with transformers at
 * all 256 (top logits within 1e-4) and with llama.cpp at 243, its fast path
 * at 246 and 239-240. Every disagreement is where the reference's best
 * leads by less than 0.37. */
struct device {
    int model;
    char name[16];
    double min_agree, kl_bound;
};
static struct device devices[] = { { 0, "cpu", 0.99, 5e-3 },      { 0, "cpu-fast", 0.99, 5e-3 },
                                   { 1, "cpu", 0.93, 1.5e-2 },    { 1, "cpu-fast", 0.93, 1.5e-2 },
                                   { 2, "cpu", 0.99, 1e-4 },      { 2, "cpu-fast", 0.93, 1e-2 } };
#define N_RUN_DEVICES 4 /* the first four: the models' greedy and perplexity tests */
static int models[N_MODELS] = { 0, 1 };

ParameterizedTestParameters(real_model, tokens_equal_llama_cpp)
{
    return cr_make_param_array(int, models, N_MODELS);
}

/* minfer's tokenizer makes llama.cpp's tokens of each text. */
ParameterizedTest(int *model, real_model, tokens_equal_llama_cpp)
{
    read_fixture(*model);
    struct model m;
    struct tokenizer t;
    struct error e;
    cr_assert_eq(model_open(&m, model_path(), &e), 0, "%s", e.msg);
    cr_assert_eq(tokenizer_load(&t, &m.gguf, &e), 0, "%s", e.msg);
    for (int k = 0; k < ref.n_prompts; k++) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        if (t.add_bos) /* as llama.cpp's tokenize(add_bos = the vocabulary's flag) */
            cr_assert_eq(tokenizer_push_bos(&t, &ids, &n, &cap, &e), 0, "%s", e.msg);
        cr_assert_eq(tokenizer_encode(&t, ref.p[k].text, strlen(ref.p[k].text), true, &ids, &n, &cap, &e), 0, "%s", e.msg);
        cr_assert_geq(n, POSITIONS);
        for (int i = 0; i < POSITIONS; i++)
            cr_assert_eq(ids[i], ref.p[k].ids[i], "%s: token %d is %d, llama.cpp made %d", ref.p[k].name, i, ids[i],
                         ref.p[k].ids[i]);
        free(ids);
    }
    tokenizer_free(&t);
    model_close(&m);
}

static double log_sum_exp(const float *x, int64_t n)
{
    float max = x[0];
    for (int64_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp((double)(x[i] - max));
    return max + log(s);
}

ParameterizedTestParameters(real_model, teacher_forced_logits_match_llama_cpp)
{
    return cr_make_param_array(struct device, devices, sizeof devices / sizeof devices[0]);
}

/* Teacher forcing over llama.cpp's tokens: the argmax agrees at (nearly)
 * every position, and KL(llama.cpp || minfer) over llama.cpp's top 20 (the
 * mass they carry, each term p log p/q with both sides normalized over the
 * whole vocabulary) stays small. The two engines differ in the order of
 * their sums (and the reference in llama.cpp's Q8 activations), so bits are
 * not expected. */
ParameterizedTest(struct device *device, real_model, teacher_forced_logits_match_llama_cpp)
{
    read_fixture(device->model);
    struct model m;
    struct error e;
    cr_assert_eq(model_open(&m, model_path(), &e), 0, "%s", e.msg);
    struct engine en;
    struct engine_config cfg = { .n_ctx = POSITIONS, .n_batch = POSITIONS, .kv_type = ref.kv, .logits_all = true,
                                 .device = device->name };
    cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
    int64_t nv = en.n_vocab;
    float *logits = malloc((size_t)(POSITIONS * nv) * sizeof *logits);
    int agree = 0, total = 0;
    double kl_sum = 0, kl_max = 0;
    for (int k = 0; k < ref.n_prompts; k++) {
        const struct prompt *p = &ref.p[k];
        engine_truncate(&en, 0);
        cr_assert_eq(engine_eval_logits(&en, p->ids, POSITIONS, logits, &e), 0, "%s", e.msg);
        int prompt_agree = 0;
        double prompt_kl = 0;
        for (int i = 0; i < POSITIONS; i++) {
            const float *row = logits + (size_t)i * (size_t)nv;
            const bool same = argmax(row, nv) == p->top[i][0].id;
            prompt_agree += same;
            cr_expect(same || p->top[i][0].logit - p->top[i][1].logit < MARGIN,
                      "%s, %s position %d: argmax %d, the reference's %d leads its second by %.3f", device->name, p->name, i,
                      argmax(row, nv), p->top[i][0].id, p->top[i][0].logit - p->top[i][1].logit);
            double lse = log_sum_exp(row, nv), kl = 0;
            for (int t = 0; t < TOP; t++) {
                double lp = p->top[i][t].logit - p->lse[i], lq = row[p->top[i][t].id] - lse;
                kl += exp(lp) * (lp - lq);
            }
            prompt_kl += kl;
            kl_max = fmax(kl_max, kl);
        }
        cr_log_info("%s, %s, %s: argmax agrees at %d of %d positions, mean KL over the top %d %.2e", ref.model,
                    device->name, p->name, prompt_agree, POSITIONS, TOP, prompt_kl / POSITIONS);
        agree += prompt_agree;
        total += POSITIONS;
        kl_sum += prompt_kl;
    }
    double kl_mean = kl_sum / total;
    cr_log_info("%s, %s, all: argmax agrees at %d of %d, mean KL %.2e, worst position %.2e", ref.model, device->name,
                agree, total, kl_mean, kl_max);
    cr_assert_geq(agree, (int)ceil(device->min_agree * total), "argmax agrees at only %d of %d positions", agree, total);
    cr_assert_leq(kl_mean, device->kl_bound, "mean KL over the reference's top 20 is %.3g, above %.3g", kl_mean,
                  device->kl_bound);
    free(logits);
    engine_free(&en);
    model_close(&m);
}

ParameterizedTestParameters(real_model, greedy_tokens_equal_llama_cpp)
{
    return cr_make_param_array(struct device, devices, N_RUN_DEVICES);
}

/* Greedy decoding after the chat prompt: llama.cpp's first sixteen tokens. */
ParameterizedTest(struct device *device, real_model, greedy_tokens_equal_llama_cpp)
{
    read_fixture(device->model);
    cr_assert_gt(ref.n_greedy, 0, "%s has no greedy record", ref.fixture);
    struct model m;
    struct error e;
    cr_assert_eq(model_open(&m, model_path(), &e), 0, "%s", e.msg);
    struct engine en;
    struct engine_config cfg = { .n_ctx = 256, .n_batch = 128, .kv_type = ref.kv, .device = device->name };
    cr_assert_eq(engine_init(&en, &m, &cfg, &e), 0, "%s", e.msg);
    cr_assert_eq(engine_eval(&en, ref.greedy_prompt, ref.n_greedy_prompt, &e), 0, "%s", e.msg);
    for (int i = 0; i < ref.n_greedy; i++) {
        int32_t next = argmax(engine_logits(&en, &e), en.n_vocab);
        cr_assert_eq(next, ref.greedy[i], "%s: greedy token %d is %d, llama.cpp chose %d", device->name, i, next, ref.greedy[i]);
        cr_assert_eq(engine_eval(&en, &next, 1, &e), 0, "%s", e.msg);
    }
    engine_free(&en);
    model_close(&m);
}

ParameterizedTestParameters(real_model, perplexity_within_one_percent_of_llama_cpp)
{
    return cr_make_param_array(struct device, devices, N_RUN_DEVICES);
}

/* `minfer perplexity` over the corpus: within 1% of llama.cpp's. */
ParameterizedTest(struct device *device, real_model, perplexity_within_one_percent_of_llama_cpp)
{
    read_fixture(device->model);
    cr_assert_gt(ref.ppl, 0, "%s has no perplexity record", ref.fixture);
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f /usr/share/common-licenses/GPL-3 -c %d --cache-type %s --device %s 2>&1",
             minfer_bin(), model_path(), ref.ppl_ctx, kv_type_name(ref.kv), device->name);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s\n%s", cmd, out);
    const char *at = strstr(out, "Final estimate: PPL = ");
    cr_assert_not_null(at, "%s", out);
    double ppl = atof(at + strlen("Final estimate: PPL = "));
    cr_log_info("%s, %s: perplexity %.4f, llama.cpp %.4f (%+.2f%%)", ref.model, device->name, ppl, ref.ppl,
                100 * (ppl / ref.ppl - 1));
    cr_assert_lt(fabs(ppl / ref.ppl - 1), 0.01, "perplexity %.4f is not within 1%% of llama.cpp's %.4f", ppl, ref.ppl);
    free(out);
}
