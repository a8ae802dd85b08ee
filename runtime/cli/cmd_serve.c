/* cmd_serve.c: `minfer serve`: the OpenAI-compatible server (server/server.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

static const char serve_usage[] =
    "usage: minfer serve -m FILE [--host 127.0.0.1] [--port 8080] [--parallel N] [--queue N] [--api-key KEY]\n"
    "                    [-c N] [-b N] [-t N] [--device cpu|cpu-fast|cuda|auto] [--cache-type f32|f16|q8_0]\n"
    "                    [--chat-template chatml|llama3|gemma] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
    "  serves POST /v1/chat/completions, POST /v1/completions, GET /v1/models and GET /health (docs/server.md)\n"
    "  --port 0       any free port (the URL line says which)\n"
    "  --parallel N   N engines (slots) over one copy of the weights, each with its own -c context\n"
    "  --queue N      requests that may wait for a slot (default 16); beyond that a 503\n"
    "  --api-key KEY  requests (but /health) need 'Authorization: Bearer KEY', else a 401\n"
    "  -n and the sampling flags are the defaults for requests that do not set them\n"
    "  stops on SIGINT or SIGTERM\n";

int cmd_serve(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return fputs(serve_usage, stdout), 0;
    struct session_options o;
    if (session_parse("serve", argc, argv, &o))
        return 1;
    if (o.engine.n_threads == 0 && o.parallel > 1) { /* the cores shared among the slots */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o.engine.n_threads = cores / o.parallel > 1 ? (int)(cores / o.parallel) : 1;
    }
    struct error e;
    return server_run(&o, &e) ? die("%s", e.msg) : 0;
}
