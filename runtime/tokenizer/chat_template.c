/* chat_template.c: recognizing a file's chat format (see chat_template.h). */
#include "tokenizer/chat_template.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* One row per format: how it is named, the marker that identifies its
 * template, how a message opens (the role goes in %s), the token that ends a
 * turn, what follows that token in the context, the assistant's role name,
 * and whether a system message has a turn of its own (Gemma's has none: its
 * template writes the system message at the start of the first user turn,
 * followed by a blank line). */
static const struct {
    const char *name, *marker, *open, *end, *after, *assistant;
    bool system_turn;
} formats[] = {
    [CHAT_CHATML] = { "chatml", "<|im_start|>", "<|im_start|>%s\n", "<|im_end|>", "\n", "assistant", true },
    [CHAT_LLAMA3] = { "llama3", "<|start_header_id|>", "<|start_header_id|>%s<|end_header_id|>\n\n", "<|eot_id|>", "",
                      "assistant", true },
    [CHAT_GEMMA] = { "gemma", "<start_of_turn>", "<start_of_turn>%s\n", "<end_of_turn>", "\n", "model", false },
};
#define N_FORMATS (int)(sizeof formats / sizeof formats[0])

const char *chat_format_name(enum chat_format f) { return formats[f].name; }
const char *chat_end_of_turn(const struct chat_template *t) { return formats[t->format].end; }
const char *chat_after_turn(const struct chat_template *t) { return formats[t->format].after; }
bool chat_system_turn(const struct chat_template *t) { return formats[t->format].system_turn; }

int chat_reply_prefix(const struct chat_template *t, char *buf, size_t n)
{
    int w = snprintf(buf, n, formats[t->format].open, formats[t->format].assistant);
    return w >= 0 && (size_t)w < n ? 0 : -1;
}

int chat_message(const struct chat_template *t, const char *role, const char *content, char *buf, size_t n)
{
    char open[128];
    snprintf(open, sizeof open, formats[t->format].open, strcmp(role, "assistant") == 0 ? formats[t->format].assistant : role);
    int w = snprintf(buf, n, "%s%s%s%s", open, content, formats[t->format].end, formats[t->format].after);
    return w >= 0 && (size_t)w < n ? 0 : -1;
}

static const char *find(const char *s, size_t n, const char *what)
{
    size_t k = strlen(what);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, what, k) == 0)
            return s + i;
    return NULL;
}

/* A literal system message in the template: the text of a Jinja string
 * that opens the system turn and closes it without anything spliced in,
 * as Qwen's '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n'. */
static void default_system(const char *s, size_t n, enum chat_format f, char *out, size_t cap)
{
    char open[64];
    snprintf(open, sizeof open, formats[f].open, "system");
    char escaped[64]; /* the opening as it is written inside a Jinja string: newlines as \n */
    size_t k = 0;
    for (const char *p = open; *p && k + 2 < sizeof escaped; p++) {
        if (*p == '\n')
            escaped[k++] = '\\', escaped[k++] = 'n';
        else
            escaped[k++] = *p;
    }
    escaped[k] = 0;
    out[0] = 0;
    for (const char *at = find(s, n, escaped); at; at = find(at + 1, n - (size_t)(at + 1 - s), escaped)) {
        const char *body = at + k, *end = find(body, n - (size_t)(body - s), formats[f].end);
        if (!end || (size_t)(end - body) >= cap)
            continue;
        bool literal = true;
        size_t len = 0;
        for (const char *p = body; p < end && literal; p++) {
            if (strchr("'\"+{}", *p))
                literal = false;
            else if (*p == '\\' && p + 1 < end)
                p++, out[len++] = *p == 'n' ? '\n' : *p;
            else
                out[len++] = *p;
        }
        out[literal ? len : 0] = 0;
        if (literal)
            return;
    }
}

int chat_template_detect(const struct gguf *g, const char *forced, struct chat_template *t, struct error *e)
{
    memset(t, 0, sizeof *t);
    const struct gguf_kv *kv = gguf_find(g, "tokenizer.chat_template");
    const char *s = kv && kv->value.type == GGUF_STRING ? kv->value.s.p : "";
    size_t n = kv && kv->value.type == GGUF_STRING ? (size_t)kv->value.s.n : 0;
    int f = -1;
    if (forced) {
        for (int i = 0; i < N_FORMATS; i++)
            if (strcmp(forced, formats[i].name) == 0)
                f = i;
        if (f < 0)
            return fail(e, "unknown chat format '%s' (minfer has chatml, llama3 and gemma)", forced);
    } else {
        for (int i = 0; i < N_FORMATS && f < 0; i++)
            if (find(s, n, formats[i].marker))
                f = i;
        if (f < 0 && n == 0)
            return fail(e, "the file has no tokenizer.chat_template (--chat-template chatml|llama3|gemma chooses one)");
        if (f < 0) {
            char start[41];
            size_t k = 0;
            for (; k < n && k < 40; k++)
                start[k] = s[k] >= ' ' ? s[k] : ' ';
            start[k] = 0;
            return fail(e, "the file's chat template is not ChatML, Llama 3's or Gemma's (it begins '%s'; "
                           "--chat-template chatml|llama3|gemma forces one)", start);
        }
    }
    t->format = (enum chat_format)f;
    if (formats[f].system_turn)
        default_system(s, n, t->format, t->default_system, sizeof t->default_system);
    return 0;
}
