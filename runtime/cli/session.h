/* session.h: what run, chat and bench share: the common flags (llama.cpp's
 * names), opening a model with its tokenizer and engine, and generating a
 * reply token by token. */
#ifndef MINFER_SESSION_H
#define MINFER_SESSION_H

#include <stdbool.h>
#include <stdio.h>

#include "engine.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer/tokenizer.h"

struct session_options {
    const char *command;     /* "run", "chat", "bench": for messages */
    const char *model, *prompt, *prompt_file, *system;
    const char *chat_template;  /* chat --chat-template: a format forced over the file's */
    int64_t n_predict;       /* -n: tokens to generate (-1: until the end of text or the context) */
    struct engine_config engine;
    struct sampler_params sampling;
    bool context_shift;      /* --context-shift: on overflow keep the start and the newest half */
    int64_t n_keep;          /* tokens at the start a shift keeps (the system prompt) */
    bool json;               /* bench --json */
    const char *logits_out;  /* run --logits-out FILE: the last logits, raw float32 */
    int64_t bench_pp, bench_tg, bench_reps;
    int64_t bench_depth; /* bench -d: tokens in the cache before each measurement */
    int64_t n_chunks;        /* perplexity --chunks: at most this many windows (-1: all) */
    const char *host, *api_key; /* serve --host (default 127.0.0.1), --api-key */
    int port, parallel, queue;  /* serve --port (8080; 0: any free one), --parallel (1), --queue (16) */
};

/* Parses argv; `allowed` lists the flags a command takes besides the common
 * ones. Prints one line and returns -1 on a bad flag. */
int session_parse(const char *cmd, int argc, char **argv, struct session_options *o);

struct session {
    struct model model;
    struct tokenizer tok;
    struct engine engine;
    struct sampler sampler;
    int32_t *history;        /* every token in the KV cache, in order */
    size_t n_history, cap_history;
    int32_t stop[TOKENIZER_END_IDS]; /* end-of-text tokens (tokenizer_end_ids; -1: absent) */
};

int session_open(struct session *s, const struct session_options *o, struct error *e);
void session_close(struct session *s);

/* Says on stderr which backend runs the session, and on what. */
void session_announce(const struct session *s, const struct session_options *o);

/* Tokenizes text (special tokens parsed) and appends it to the context. */
int session_feed(struct session *s, const struct session_options *o, const char *text, struct error *e);

/* Samples up to n tokens (or to an end-of-text token), streaming the text
 * to out; appends them to the context. *n_out counts the tokens made; the
 * stop token, if reached, is not printed but is in the context. */
int session_generate(struct session *s, const struct session_options *o, int64_t n, FILE *out, int64_t *n_out,
                     struct error *e);

double session_now(void);

/* Reads a whole file as a NUL-terminated string (*out, to free). */
int read_text_file(const char *path, char **out, struct error *e);

#endif
