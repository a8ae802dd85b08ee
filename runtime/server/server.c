/* server.c: minfer serve's HTTP side over libmicrohttpd (a thread per
 * connection): the routes, the API key, the body limit, replies whole or
 * as server-sent events, one log line per request, start and shutdown. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/server.h"

#include <microhttpd.h>
#include <poll.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api.h"
#include "server/slots.h"
#include "tokenizer/chat_template.h"

struct server {
    const struct session_options *o;
    struct model model;
    struct tokenizer tok;
    struct chat_template tmpl;
    bool has_tmpl;
    struct slot_pool pool;
    char model_id[256];
    long created;
    unsigned long next_id;
    pthread_mutex_t mu; /* next_id */
};

/* One connection's request as its body arrives. */
struct request_ctx {
    char *body;
    size_t n, cap;
    bool too_big, answered;
    double t0;
};

static void log_line(const char *method, const char *url, int status, const struct generation *g, double t0,
                     const char *note)
{
    char tokens[128] = "";
    if (g)
        snprintf(tokens, sizeof tokens, " prompt %lld (cached %lld) + %lld generated", (long long)g->n_prompt,
                 (long long)g->n_cached, (long long)g->n_made);
    fprintf(stderr, "serve: %d %s %s%s, %.1f ms%s%s\n", status, method, url, tokens, 1e3 * (session_now() - t0),
            note ? ", " : "", note ? note : "");
}

static enum MHD_Result reply(struct MHD_Connection *c, int status, char *body)
{
    if (!body)
        return MHD_NO; /* out of memory: MHD closes the connection */
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, const char *method, const char *url,
                                   const struct request_ctx *rq, const struct api_error *err)
{
    log_line(method, url, err->status, NULL, rq->t0, err->message);
    return reply(c, err->status, api_error_body(err));
}

/* ---- a streamed reply ---- */

struct stream {
    struct server *srv;
    struct gen_request req;
    struct generation g;
    struct api_reply reply;
    char id[48], url[64];
    char *out;            /* event bytes made and not yet handed to MHD: out[at, n_out) */
    size_t n_out, at;
    bool first, ended, released;
    double t0;
};

static int push_event(struct stream *st, char *json)
{
    if (!json)
        return -1;
    size_t n = strlen(json) + 8;
    char *p = realloc(st->out, st->n_out + n + 1);
    if (p) {
        st->out = p;
        st->n_out += (size_t)sprintf(p + st->n_out, "data: %s\n\n", json);
    }
    free(json);
    return p ? 0 : -1;
}

static void stream_release(struct stream *st, const char *note)
{
    if (st->released)
        return;
    st->released = true;
    slot_release(&st->srv->pool, st->g.slot);
    log_line("POST", st->url, 200, &st->g, st->t0, note);
}

/* One more token's worth of events (or the end of the stream). */
static int stream_produce(struct stream *st)
{
    struct error e;
    if (st->g.done || generation_step(&st->g, &e) == 0) {
        size_t ready = generation_ready(&st->g);
        if (ready || st->first) { /* the first chunk carries the role */
            if (push_event(st, api_chunk_body(&st->reply, st->g.text ? st->g.text + st->g.sent : "", ready, st->first, NULL)))
                return -1;
            st->g.sent += ready, st->first = false;
        }
        if (!st->g.done)
            return 0;
        if (push_event(st, api_chunk_body(&st->reply, "", 0, false, st->g.finish)) ||
            (st->req.include_usage && push_event(st, api_usage_chunk_body(&st->reply, &st->g))))
            return -1;
        stream_release(st, NULL);
    } else { /* the engine failed mid-stream: say so in the stream, then end it */
        struct api_error err;
        api_fail(&err, 500, "server_error", NULL, NULL, "%s", e.msg);
        if (push_event(st, api_error_body(&err)))
            return -1;
        stream_release(st, e.msg);
    }
    char *p = realloc(st->out, st->n_out + 16);
    if (!p)
        return -1;
    st->out = p;
    st->n_out += (size_t)sprintf(p + st->n_out, "data: [DONE]\n\n");
    st->ended = true;
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct stream *st = cls;
    while (st->at == st->n_out) {
        st->at = st->n_out = 0;
        if (st->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (stream_produce(st))
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->n_out - st->at < max ? st->n_out - st->at : max;
    memcpy(buf, st->out + st->at, n);
    st->at += n;
    return (ssize_t)n;
}

/* The connection is done with the stream: finished, or the client left
 * (then the slot is freed here, at once). */
static void stream_free(void *cls)
{
    struct stream *st = cls;
    stream_release(st, "client closed the stream");
    generation_free(&st->g);
    api_request_free(&st->req);
    free(st->out);
    free(st);
}

/* ---- the generation endpoints ---- */

/* Whether the client closed its connection (checked between tokens of a
 * whole reply, so a client that gave up frees its slot; a stream learns it
 * from a failed write). A client that only shut down its sending side looks
 * the same, as HTTP clients do not do that. */
static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd p = { ci ? ci->connect_fd : -1, POLLRDHUP, 0 };
    return ci && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static int tokenize(const struct server *srv, const char *text, int32_t **ids, size_t *n, struct error *e)
{
    size_t cap = 0;
    *ids = NULL, *n = 0;
    if (srv->tok.add_bos && tokenizer_push_bos(&srv->tok, ids, n, &cap, e))
        return -1;
    return tokenizer_encode(&srv->tok, text, strlen(text), true, ids, n, &cap, e);
}

static enum MHD_Result generate(struct server *srv, struct MHD_Connection *c, const char *url, bool chat,
                                struct request_ctx *rq)
{
    struct gen_request req;
    struct api_error err;
    struct error e;
    if (api_parse_request(rq->body ? rq->body : "", rq->n, chat, srv->has_tmpl ? &srv->tmpl : NULL, &srv->o->sampling,
                          &req, &err))
        return reply_error(c, "POST", url, rq, &err);
    int32_t *ids;
    size_t n;
    const int64_t n_ctx = srv->pool.slot[0].engine.cfg.n_ctx;
    const char *what = chat ? "messages" : "prompt";
    if (tokenize(srv, req.prompt, &ids, &n, &e))
        api_fail(&err, 400, "invalid_request_error", what, NULL, "%s", e.msg);
    else if (n == 0)
        api_fail(&err, 400, "invalid_request_error", what, NULL, "the prompt has no tokens");
    else if ((int64_t)n >= n_ctx)
        api_fail(&err, 400, "invalid_request_error", what, "context_length_exceeded",
                 "the prompt is %zu tokens and the context holds %lld (the server's -c)", n, (long long)n_ctx);
    else if (req.max_tokens > 0 && (int64_t)n + req.max_tokens > n_ctx)
        api_fail(&err, 400, "invalid_request_error", "max_tokens", "context_length_exceeded",
                 "max_tokens %lld plus the prompt's %zu tokens exceed the context of %lld (the server's -c)",
                 (long long)req.max_tokens, n, (long long)n_ctx);
    else
        err.status = 0;
    struct slot *slot = err.status ? NULL : slot_acquire(&srv->pool, ids, n);
    if (!err.status && !slot)
        api_fail(&err, 503, "server_error", NULL, "overloaded", "all %d slots are busy and %d requests wait (--queue)",
                 srv->pool.n, srv->pool.queue_max);
    struct stream *st = err.status ? NULL : calloc(1, sizeof *st);
    if (!err.status && !st)
        api_fail(&err, 500, "server_error", NULL, NULL, "out of memory");
    if (!err.status && generation_start(&st->g, slot, &srv->tok, ids, n, &req.sampling, &e))
        api_fail(&err, 500, "server_error", NULL, NULL, "%s", e.msg);
    free(ids);
    if (err.status) {
        if (slot)
            slot_release(&srv->pool, slot);
        if (st)
            generation_free(&st->g);
        free(st);
        api_request_free(&req);
        return reply_error(c, "POST", url, rq, &err);
    }
    st->srv = srv, st->req = req, st->first = true, st->t0 = rq->t0;
    st->g.max_tokens = req.max_tokens;
    for (int i = 0; i < req.n_stop; i++)
        st->g.stop[st->g.n_stop++] = st->req.stop[i];
    pthread_mutex_lock(&srv->mu);
    snprintf(st->id, sizeof st->id, "%s-%lu", chat ? "chatcmpl" : "cmpl", ++srv->next_id);
    pthread_mutex_unlock(&srv->mu);
    snprintf(st->url, sizeof st->url, "%s", url);
    st->reply = (struct api_reply){ st->id, srv->model_id, (long)time(NULL), chat };
    if (req.stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free);
        if (!r) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return rc;
    }
    int rc = 0;
    bool gone = false;
    while (!rc && !st->g.done && !(gone = client_gone(c)))
        rc = generation_step(&st->g, &e);
    char *body = NULL;
    if (rc)
        api_fail(&err, 500, "server_error", NULL, NULL, "%s", e.msg);
    else if (!gone)
        body = api_completion_body(&st->reply, &st->g);
    st->released = true;
    slot_release(&srv->pool, slot);
    if (!rc)
        log_line("POST", url, 200, &st->g, rq->t0, gone ? "client closed before the reply" : NULL);
    stream_free(st);
    if (gone)
        return MHD_NO; /* nobody to answer: close the connection */
    return rc ? reply_error(c, "POST", url, rq, &err) : reply(c, 200, body);
}

/* ---- routing ---- */

static bool authorized(const struct server *srv, struct MHD_Connection *c)
{
    const char *key = srv->o->api_key;
    if (!key)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    size_t n = strlen(key), m = strlen(h);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) /* the same time whichever byte differs */
        diff |= (unsigned char)(key[i] ^ (i < m ? h[i] : 0));
    return diff == 0;
}

static enum MHD_Result route(struct server *srv, struct MHD_Connection *c, const char *url, const char *method,
                             struct request_ctx *rq)
{
    static const struct {
        const char *path, *method;
    } routes[] = { { "/health", "GET" }, { "/v1/models", "GET" }, { "/v1/chat/completions", "POST" },
                   { "/v1/completions", "POST" } };
    struct api_error err;
    int r = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(url, routes[i].path) == 0)
            r = i;
    if (r < 0) {
        api_fail(&err, 404, "invalid_request_error", NULL, "not_found", "no endpoint %.200s (see docs/server.md)", url);
        return reply_error(c, method, url, rq, &err);
    }
    if (strcmp(method, routes[r].method) != 0) {
        api_fail(&err, 405, "invalid_request_error", NULL, "method_not_allowed", "%s takes %s, not %.16s", url,
                 routes[r].method, method);
        return reply_error(c, method, url, rq, &err);
    }
    if (r == 0) {
        log_line(method, url, 200, NULL, rq->t0, NULL);
        return reply(c, 200, strdup("{\"status\":\"ok\"}"));
    }
    if (r == 1) {
        log_line(method, url, 200, NULL, rq->t0, NULL);
        return reply(c, 200, api_models_body(srv->model_id, srv->created));
    }
    return generate(srv, c, url, r == 2, rq);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct server *srv = cls;
    struct request_ctx *rq = *con_cls;
    struct api_error err;
    if (!rq) { /* the headers: refuse what needs no body to refuse */
        if (!(rq = calloc(1, sizeof *rq)))
            return MHD_NO;
        *con_cls = rq;
        rq->t0 = session_now();
        const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (strcmp(url, "/health") != 0 && !authorized(srv, c))
            api_fail(&err, 401, "invalid_request_error", NULL, "invalid_api_key",
                     "a valid API key is required: 'Authorization: Bearer KEY'");
        else if (len && strtoull(len, NULL, 10) > SERVER_MAX_BODY)
            api_fail(&err, 413, "invalid_request_error", NULL, "body_too_large", "the body is %s bytes; the limit is %zu",
                     len, SERVER_MAX_BODY);
        else
            return MHD_YES;
        rq->answered = true;
        return reply_error(c, method, url, rq, &err);
    }
    if (*upload_size) {
        if (!rq->answered && !rq->too_big) {
            if (rq->n + *upload_size > SERVER_MAX_BODY) {
                rq->too_big = true;
            } else {
                if (rq->n + *upload_size + 1 > rq->cap) {
                    size_t cap = (rq->n + *upload_size + 1) * 2;
                    char *p = realloc(rq->body, cap);
                    if (!p)
                        return MHD_NO;
                    rq->body = p, rq->cap = cap;
                }
                memcpy(rq->body + rq->n, upload, *upload_size);
                rq->n += *upload_size;
                rq->body[rq->n] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->answered)
        return MHD_YES;
    rq->answered = true;
    if (rq->too_big) {
        api_fail(&err, 413, "invalid_request_error", NULL, "body_too_large", "the body is over the limit of %zu bytes",
                 SERVER_MAX_BODY);
        return reply_error(c, method, url, rq, &err);
    }
    return route(srv, c, url, method, rq);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    struct request_ctx *rq = *con_cls;
    if (rq)
        free(rq->body);
    free(rq);
    *con_cls = NULL;
}

/* ---- start and stop ---- */

static int open_server(struct server *srv, const struct session_options *o, struct error *e)
{
    memset(srv, 0, sizeof *srv);
    srv->o = o;
    pthread_mutex_init(&srv->mu, NULL);
    fprintf(stderr, "serve: loading %s\n", o->model);
    if (model_open(&srv->model, o->model, e))
        return -1;
    if (tokenizer_load(&srv->tok, &srv->model.gguf, e)) {
        model_close(&srv->model);
        return fail_prefix(e, "%s", o->model);
    }
    srv->has_tmpl = chat_template_detect(&srv->model.gguf, o->chat_template, &srv->tmpl, e) == 0;
    if (!srv->has_tmpl)
        fprintf(stderr, "serve: %s; /v1/chat/completions will say so (--chat-template chatml|llama3|gemma sets one)\n", e->msg);
    const char *base = strrchr(o->model, '/');
    snprintf(srv->model_id, sizeof srv->model_id, "%s", base ? base + 1 : o->model);
    srv->created = (long)time(NULL);
    fprintf(stderr, "serve: registering the weights and starting %d slot%s\n", o->parallel, o->parallel > 1 ? "s" : "");
    if (slot_pool_init(&srv->pool, &srv->model, &o->engine, o->parallel, o->queue, e)) {
        tokenizer_free(&srv->tok);
        model_close(&srv->model);
        return -1;
    }
    char device[160];
    engine_describe(&srv->pool.slot[0].engine, device, sizeof device);
    fprintf(stderr, "serve: backend %s, context %lld per slot\n", device, (long long)srv->pool.slot[0].engine.cfg.n_ctx);
    return 0;
}

static void close_server(struct server *srv)
{
    slot_pool_free(&srv->pool);
    tokenizer_free(&srv->tok);
    model_close(&srv->model);
    pthread_mutex_destroy(&srv->mu);
}

int server_run(const struct session_options *o, struct error *e)
{
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
    const char *host = strcmp(o->host, "localhost") == 0 ? "127.0.0.1" : o->host;
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return fail(e, "serve: --host %s is not an IPv4 address", o->host);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL); /* every thread started from here leaves them to sigwait */
    signal(SIGPIPE, SIG_IGN);
    struct server srv;
    if (open_server(&srv, o, e))
        return -1;
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, &srv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(o->parallel + o->queue + 64), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)600, MHD_OPTION_END);
    if (!d) {
        close_server(&srv);
        return fail(e, "serve: cannot listen on %s:%d (in use, or not this machine's address)", o->host, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "serve: listening on http://%s:%u (%d slot%s, a queue of %d%s)\n", o->host,
            info ? (unsigned)info->port : (unsigned)o->port, o->parallel, o->parallel > 1 ? "s" : "", o->queue,
            o->api_key ? ", API key required" : "");
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    MHD_stop_daemon(d);
    close_server(&srv);
    return 0;
}
