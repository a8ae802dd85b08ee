/* api.h: the OpenAI API's JSON: a request's body checked field by field
 * into what a generation needs (a chat's messages formatted by the model's
 * chat template), and the bodies of replies, stream chunks and errors. */
#ifndef MINFER_SERVER_API_H
#define MINFER_SERVER_API_H

#include <stdbool.h>
#include <stdint.h>

#include "sampler.h"
#include "server/slots.h"
#include "tokenizer/chat_template.h"

/* An error as OpenAI words it: {"error": {"message", "type", "param", "code"}}. */
struct api_error {
    int status;              /* HTTP status */
    const char *type;        /* "invalid_request_error", ... */
    const char *param;       /* the field at fault (param_text), or NULL */
    const char *code;        /* a short code, or NULL */
    char param_text[64];
    char message[512];
};

void api_fail(struct api_error *err, int status, const char *type, const char *param, const char *code, const char *fmt,
              ...) __attribute__((format(printf, 6, 7)));

struct gen_request {
    bool chat;               /* /v1/chat/completions, else /v1/completions */
    bool stream, include_usage;
    char *prompt;            /* the text to tokenize (a chat's messages formatted) */
    int64_t max_tokens;      /* -1: not given */
    struct sampler_params sampling;
    char *stop[GEN_MAX_STOP];
    int n_stop;
};

/* Parses a request body; t is the model's chat template (NULL if it has
 * none minfer knows: then a chat request is an error saying so). Unknown
 * fields are ignored, as OpenAI's own server does; a known one of the
 * wrong type or range is an error naming it. */
int api_parse_request(const char *body, size_t n, bool chat, const struct chat_template *t,
                      const struct sampler_params *defaults, struct gen_request *r, struct api_error *err);
void api_request_free(struct gen_request *r);

/* Reply bodies (malloc'd NUL-terminated JSON; NULL when out of memory). */
struct api_reply {
    const char *id, *model;
    long created;
    bool chat;
};
char *api_error_body(const struct api_error *err);
char *api_models_body(const char *model, long created);
/* The whole reply of a finished generation, with usage and timings. */
char *api_completion_body(const struct api_reply *r, const struct generation *g);
/* One stream chunk: the text delta (n bytes), the first chunk of a chat
 * also carrying the role; finish non-NULL on the last. */
char *api_chunk_body(const struct api_reply *r, const char *text, size_t n, bool first, const char *finish);
/* The usage chunk a stream ends with when stream_options.include_usage asks for it. */
char *api_usage_chunk_body(const struct api_reply *r, const struct generation *g);

#endif
