/* fuzz_api.c: libFuzzer entry for the server's request parser and reply
 * builders (runtime/server/api.c). Whatever a client sends, parsing must
 * either fill a request or refuse it with an error naming the problem, and
 * free what it made; any bytes a model generates must become valid JSON
 * replies. The first byte picks the endpoint and the chat format. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const bool chat = data[0] & 1;
    struct chat_template t = { .format = (enum chat_format)((data[0] >> 1) % 3) };
    if (data[0] & 8)
        strcpy(t.default_system, "You are a test.");
    const struct sampler_params defaults = { 0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 7 };
    struct gen_request r;
    struct api_error err;
    const char *body = (const char *)data + 1;
    if (api_parse_request(body, size - 1, chat, (data[0] & 16) ? NULL : &t, &defaults, &r, &err) == 0) {
        sink += strlen(r.prompt) + (size_t)r.n_stop;
        api_request_free(&r);
    } else {
        char *e = api_error_body(&err);
        sink += e ? strlen(e) : 0;
        free(e);
    }
    /* the same bytes as generated text, in every reply shape */
    struct generation g;
    memset(&g, 0, sizeof g);
    g.text = (char *)body, g.n_text = size - 1, g.finish = "stop";
    const struct api_reply reply = { "cmpl-1", "model", 0, chat };
    char *out[3] = { api_completion_body(&reply, &g), api_chunk_body(&reply, body, size - 1, data[0] & 32, NULL),
                     api_usage_chunk_body(&reply, &g) };
    for (int i = 0; i < 3; i++) {
        sink += out[i] ? strlen(out[i]) : 0;
        free(out[i]);
    }
    return 0;
}
