/* api.c: the OpenAI API's JSON, in and out (see api.h). */
#include "server/api.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void api_fail(struct api_error *err, int status, const char *type, const char *param, const char *code, const char *fmt,
              ...)
{
    err->status = status, err->type = type, err->code = code, err->param = NULL;
    if (param)
        err->param = err->param_text, snprintf(err->param_text, sizeof err->param_text, "%s", param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

#define BAD(param, ...) (api_fail(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__), -1)

/* ---- the request ---- */

/* A whole number in [lo, hi] (JSON has only doubles: 3.5 is not one). */
static int whole(const cJSON *v, const char *name, double lo, double hi, int64_t *out, struct api_error *err)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return BAD(name, "'%s' must be a whole number from %.0f to %.0f", name, lo, hi);
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int real(const cJSON *v, const char *name, double lo, double hi, float *out, struct api_error *err)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return BAD(name, "'%s' must be a number from %g to %g", name, lo, hi);
    *out = (float)v->valuedouble;
    return 0;
}

/* OpenAI fields minfer does not implement: an error unless they ask for nothing. */
static int unsupported(const cJSON *root, struct api_error *err)
{
    static const char *const names[] = { "tools", "functions", "tool_choice", "logprobs", "top_logprobs", "logit_bias",
                                         "presence_penalty", "frequency_penalty", "response_format", "echo",
                                         "best_of", "suffix" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        bool nothing = !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0) ||
                       ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child) ||
                       (strcmp(names[i], "response_format") == 0 && cJSON_IsObject(v) &&
                        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "type")) &&
                        strcmp(cJSON_GetObjectItemCaseSensitive(v, "type")->valuestring, "text") == 0) ||
                       (strcmp(names[i], "best_of") == 0 && cJSON_IsNumber(v) && v->valuedouble == 1);
        if (!nothing)
            return BAD(names[i], "'%s' is not supported by minfer", names[i]);
    }
    return 0;
}

static int parse_stop(const cJSON *v, struct gen_request *r, struct api_error *err)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsString(v) || cJSON_IsArray(v)) {
        const cJSON *one = cJSON_IsString(v) ? v : v->child;
        if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > GEN_MAX_STOP)
            return BAD("stop", "'stop' takes at most %d strings", GEN_MAX_STOP);
        for (; one; one = cJSON_IsString(v) ? NULL : one->next) {
            if (!cJSON_IsString(one) || !one->valuestring[0])
                return BAD("stop", "'stop' must be a non-empty string or an array of them");
            if (!(r->stop[r->n_stop++] = strdup(one->valuestring)))
                return api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
        }
        return 0;
    }
    return BAD("stop", "'stop' must be a string or an array of strings");
}

/* The sampling knobs and limits both endpoints share. */
static int parse_common(const cJSON *root, const struct sampler_params *defaults, struct gen_request *r,
                        struct api_error *err)
{
    const cJSON *v;
    int64_t x;
    r->sampling = *defaults;
    r->max_tokens = -1;
    if (unsupported(root, err))
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "model")) && !cJSON_IsString(v))
        return BAD("model", "'model' must be a string");
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "n")) && !cJSON_IsNull(v) && (whole(v, "n", 1, 1, &x, err)))
        return BAD("n", "'n' must be 1: minfer makes one choice per request");
    const char *max_name = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((v = cJSON_GetObjectItemCaseSensitive(root, max_name)) && !cJSON_IsNull(v) &&
        whole(v, max_name, 1, 1 << 24, &r->max_tokens, err))
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "temperature")) && !cJSON_IsNull(v) &&
        real(v, "temperature", 0, 2, &r->sampling.temp, err))
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "top_p")) && !cJSON_IsNull(v) && real(v, "top_p", 0, 1, &r->sampling.top_p, err))
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "min_p")) && !cJSON_IsNull(v) && real(v, "min_p", 0, 1, &r->sampling.min_p, err))
        return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "top_k")) && !cJSON_IsNull(v)) {
        if (whole(v, "top_k", 0, 1 << 24, &x, err))
            return -1;
        r->sampling.top_k = (int)x;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "seed")) && !cJSON_IsNull(v)) {
        if (whole(v, "seed", -9.2e18, 9.2e18, &x, err))
            return -1;
        r->sampling.seed = (uint64_t)x;
    } else { /* no seed: a fresh one (the same text twice needs a seed) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->sampling.seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)r;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsBool(v))
            return BAD("stream", "'stream' must be true or false");
        r->stream = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream_options")) && !cJSON_IsNull(v)) {
        const cJSON *u = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "include_usage") : NULL;
        if (!cJSON_IsObject(v) || (u && !cJSON_IsBool(u)))
            return BAD("stream_options", "'stream_options' must be an object with a boolean 'include_usage'");
        r->include_usage = cJSON_IsTrue(u);
    }
    return parse_stop(cJSON_GetObjectItemCaseSensitive(root, "stop"), r, err);
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts. */
static int content_of(const cJSON *m, int i, char **out, struct api_error *err)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(c))
        return (*out = strdup(c->valuestring)) ? 0 : (api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1);
    if (!cJSON_IsArray(c))
        return BAD(param, "'messages[%d].content' must be a string or an array of text parts", i);
    size_t n = 1;
    for (const cJSON *p = c->child; p; p = p->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text))
            return BAD(param, "'messages[%d].content' parts must be {\"type\": \"text\", \"text\": ...} (minfer reads text only)", i);
        n += strlen(text->valuestring);
    }
    if (!(*out = malloc(n)))
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    (*out)[0] = 0;
    for (const cJSON *p = c->child; p; p = p->next)
        strcat(*out, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    return 0;
}

/* Appends one formatted message to *text (grown as needed). */
static int add_message(const struct chat_template *t, const char *role, const char *content, char **text, size_t *len,
                       struct api_error *err)
{
    size_t need = strlen(content) + 256;
    char *p = realloc(*text, *len + need);
    if (!p || chat_message(t, role, content, p + *len, need)) {
        *text = p ? p : *text;
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1;
    }
    *text = p;
    *len += strlen(p + *len);
    return 0;
}

static int parse_messages(const cJSON *root, const struct chat_template *t, struct gen_request *r, struct api_error *err)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms)
        return BAD("messages", "'messages' is required");
    if (!cJSON_IsArray(ms) || !ms->child)
        return BAD("messages", "'messages' must be a non-empty array of messages");
    if (!t)
        return api_fail(err, 400, "invalid_request_error", "messages", "no_chat_template",
                        "this model has no chat template minfer knows (start the server with --chat-template)"), -1;
    char *text = calloc(1, 1), *system = NULL; /* a system message waiting for the first user turn */
    size_t len = 0;
    int i = 0, rc = text ? 0 : (api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1);
    for (const cJSON *m = ms->child; !rc && m; m = m->next, i++) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d].role", i);
        const cJSON *role = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, "role") : NULL;
        if (!cJSON_IsObject(m)) {
            rc = BAD("messages", "'messages[%d]' must be an object with 'role' and 'content'", i);
            break;
        }
        if (!cJSON_IsString(role)) {
            rc = BAD(param, "'messages[%d].role' must be a string", i);
            break;
        }
        const char *name = role->valuestring;
        if (strcmp(name, "developer") == 0) /* OpenAI's newer name for the system role */
            name = "system";
        if (strcmp(name, "system") != 0 && strcmp(name, "user") != 0 && strcmp(name, "assistant") != 0) {
            rc = BAD(param, "unknown role '%.64s' in messages[%d] (system, user or assistant)", role->valuestring, i);
            break;
        }
        char *content = NULL;
        if ((rc = content_of(m, i, &content, err)))
            break;
        if (!chat_system_turn(t) && strcmp(name, "system") == 0) { /* Gemma: it starts the first user turn */
            const cJSON *next = m->next ? cJSON_GetObjectItemCaseSensitive(m->next, "role") : NULL;
            if (i != 0 || !cJSON_IsString(next) || strcmp(next->valuestring, "user") != 0) {
                free(content);
                rc = BAD(param, "this model's chat format takes a system message only first, before a user message");
                break;
            }
            system = content;
            continue;
        }
        if (system) { /* the first user turn after the system message, a blank line between them */
            char *joined = malloc(strlen(system) + strlen(content) + 3);
            if (joined)
                sprintf(joined, "%s\n\n%s", system, content);
            free(content), free(system);
            content = joined, system = NULL;
            if (!content) {
                rc = (api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1);
                break;
            }
        }
        if (i == 0 && strcmp(name, "system") != 0 && t->default_system[0]) /* as the template writes it */
            rc = add_message(t, "system", t->default_system, &text, &len, err);
        rc = rc || add_message(t, name, content, &text, &len, err);
        free(content);
    }
    free(system);
    if (!rc) {
        char prefix[128];
        char *p = chat_reply_prefix(t, prefix, sizeof prefix) ? NULL : realloc(text, len + strlen(prefix) + 1);
        if (p)
            strcpy(p + len, prefix), text = p;
        else
            rc = (api_fail(err, 500, "server_error", NULL, NULL, "out of memory for the reply's prefix"), -1);
    }
    if (rc)
        free(text);
    else
        r->prompt = text;
    return rc;
}

static int parse_prompt(const cJSON *root, struct gen_request *r, struct api_error *err)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!p)
        return BAD("prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1)
        p = p->child;
    if (!cJSON_IsString(p))
        return BAD("prompt", "'prompt' must be a string (or an array of one string)");
    if (!p->valuestring[0])
        return BAD("prompt", "'prompt' is empty");
    return (r->prompt = strdup(p->valuestring)) ? 0 : (api_fail(err, 500, "server_error", NULL, NULL, "out of memory"), -1);
}

int api_parse_request(const char *body, size_t n, bool chat, const struct chat_template *t,
                      const struct sampler_params *defaults, struct gen_request *r, struct api_error *err)
{
    memset(r, 0, sizeof *r);
    r->chat = chat;
    cJSON *root = cJSON_ParseWithLength(body, n);
    if (!root)
        return BAD(NULL, "the body is not valid JSON (near byte %td)", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - body : 0);
    int rc = cJSON_IsObject(root) ? 0 : BAD(NULL, "the body must be a JSON object");
    rc = rc || parse_common(root, defaults, r, err) || (chat ? parse_messages(root, t, r, err) : parse_prompt(root, r, err));
    cJSON_Delete(root);
    if (rc)
        api_request_free(r);
    return rc;
}

void api_request_free(struct gen_request *r)
{
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

/* ---- replies ---- */

/* n bytes of generated text as a valid UTF-8 string: a byte that does not
 * begin or continue a whole character (a random model's byte tokens) and
 * NUL become U+FFFD. */
static char *utf8_clean(const char *s, size_t n)
{
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int need = p[i] < 0x80 ? 0 : (p[i] & 0xe0) == 0xc0 && p[i] >= 0xc2 ? 1 : (p[i] & 0xf0) == 0xe0 ? 2
                 : (p[i] & 0xf8) == 0xf0 && p[i] <= 0xf4 ? 3 : -1;
        bool ok = p[i] != 0 && need >= 0;
        for (int k = 1; ok && k <= need; k++)
            ok = i + (size_t)k < n && (p[i + k] & 0xc0) == 0x80;
        if (ok && need == 2) /* no overlong forms or surrogates */
            ok = !(p[i] == 0xe0 && p[i + 1] < 0xa0) && !(p[i] == 0xed && p[i + 1] >= 0xa0);
        if (ok && need == 3)
            ok = !(p[i] == 0xf0 && p[i + 1] < 0x90) && !(p[i] == 0xf4 && p[i + 1] >= 0x90);
        if (ok) {
            memcpy(o, p + i, (size_t)need + 1);
            o += need + 1, i += (size_t)need + 1;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    *o = 0;
    return out;
}

static char *print(cJSON *root)
{
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

char *api_error_body(const struct api_error *err)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", err->message);
    cJSON_AddStringToObject(e, "type", err->type);
    err->param ? (void)cJSON_AddStringToObject(e, "param", err->param) : (void)cJSON_AddNullToObject(e, "param");
    err->code ? (void)cJSON_AddStringToObject(e, "code", err->code) : (void)cJSON_AddNullToObject(e, "code");
    return print(root);
}

char *api_models_body(const char *model, long created)
{
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(m, "id", model);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)created);
    cJSON_AddStringToObject(m, "owned_by", "minfer");
    cJSON_AddItemToArray(data, m);
    return print(root);
}

static cJSON *reply_head(const struct api_reply *r, bool chunk)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", r->id);
    cJSON_AddStringToObject(root, "object", r->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)r->created);
    cJSON_AddStringToObject(root, "model", r->model);
    cJSON_AddStringToObject(root, "system_fingerprint", "minfer");
    return root;
}

/* usage (with the cached part of the prompt, OpenAI's field) and timings (llama.cpp's) */
static void add_usage(cJSON *root, const struct generation *g)
{
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)g->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)g->n_made);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(g->n_prompt + g->n_made));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", (double)g->n_cached);
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "cache_n", (double)g->n_cached);
    cJSON_AddNumberToObject(t, "prompt_n", (double)(g->n_prompt - g->n_cached));
    cJSON_AddNumberToObject(t, "prompt_ms", 1e3 * (g->t_prompt - g->t_start));
    cJSON_AddNumberToObject(t, "predicted_n", (double)g->n_made);
    cJSON_AddNumberToObject(t, "predicted_ms", 1e3 * (g->t_end - g->t_prompt));
}

/* choices[0] with the text (n bytes) where the endpoint puts it */
static cJSON *add_choice(cJSON *root, const struct api_reply *r, const char *text, size_t n, bool delta, bool first,
                         const char *finish)
{
    cJSON *choices = cJSON_AddArrayToObject(root, "choices"), *c = cJSON_CreateObject();
    char *clean = utf8_clean(text, n);
    cJSON_AddNumberToObject(c, "index", 0);
    if (r->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, delta ? "delta" : "message");
        if (!delta || first)
            cJSON_AddStringToObject(m, "role", "assistant");
        if (!delta || n)
            cJSON_AddStringToObject(m, "content", clean ? clean : "");
    } else {
        cJSON_AddStringToObject(c, "text", clean ? clean : "");
        cJSON_AddNullToObject(c, "logprobs");
    }
    finish ? (void)cJSON_AddStringToObject(c, "finish_reason", finish) : (void)cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    free(clean);
    return c;
}

char *api_completion_body(const struct api_reply *r, const struct generation *g)
{
    cJSON *root = reply_head(r, false);
    add_choice(root, r, g->text ? g->text : "", g->n_text, false, true, g->finish);
    add_usage(root, g);
    return print(root);
}

char *api_chunk_body(const struct api_reply *r, const char *text, size_t n, bool first, const char *finish)
{
    cJSON *root = reply_head(r, true);
    add_choice(root, r, text, n, true, first, finish);
    return print(root);
}

char *api_usage_chunk_body(const struct api_reply *r, const struct generation *g)
{
    cJSON *root = reply_head(r, true);
    cJSON_AddArrayToObject(root, "choices");
    add_usage(root, g);
    return print(root);
}
