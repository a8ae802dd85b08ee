/* cmd_run.c: `minfer run` (complete a prompt) and `minfer chat` (a
 * conversation in the file's chat format, reusing the KV cache across turns). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tokenizer/chat_template.h"
#include "cli/session.h"

static const char run_usage[] =
    "usage: minfer run -m FILE (-p TEXT | -f FILE) [-n N] [-c N] [-b N] [-t N] [--temp T] [--top-k K] [--top-p P]\n"
    "                  [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S] [--cache-type f32|f16|q8_0]\n"
    "                  [--context-shift [--keep N]] [--logits-out FILE] [--device cpu|cpu-fast|cuda|auto]\n"
    "  -n N   tokens to generate (default: until end of text or the context is full)\n"
    "  -c N   context size (default: the model's training context)\n"
    "  --temp 0 is greedy; --context-shift keeps the first --keep tokens and the newest half of the rest\n"
    "  --logits-out FILE writes the last logits as raw little-endian float32\n";

static const char chat_usage[] =
    "usage: minfer chat -m FILE [--system TEXT] [--chat-template chatml|llama3|gemma] [-n N] [-c N] [sampling flags as for run]\n"
    "  reads one user message per line from standard input; an empty line or end of input ends the chat\n"
    "  the format comes from the file's chat template; without --system, the template's default system message\n";

static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    return false;
}

static void report(const char *what, int64_t n, double seconds)
{
    fprintf(stderr, "%s: %lld tokens in %.2f s, %.2f tokens/s\n", what, (long long)n, seconds,
            seconds > 0 ? (double)n / seconds : 0.0);
}

int cmd_run(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return fputs(run_usage, stdout), 0;
    struct session_options o;
    if (session_parse("run", argc, argv, &o))
        return 1;
    char *from_file = NULL;
    struct error e;
    if (o.prompt_file) {
        if (read_text_file(o.prompt_file, &from_file, &e))
            return die("run: %s", e.msg);
        o.prompt = from_file;
    }
    if (!o.prompt)
        return die("run: -p TEXT (or -f FILE) is required");
    struct session s;
    if (session_open(&s, &o, &e))
        return free(from_file), die("%s", e.msg);
    session_announce(&s, &o);
    double t0 = session_now();
    int rc = session_feed(&s, &o, o.prompt, &e);
    double t1 = session_now();
    int64_t n_prompt = (int64_t)s.n_history; /* before a context shift can drop any of it */
    int64_t made = 0;
    if (!rc)
        rc = session_generate(&s, &o, o.n_predict, stdout, &made, &e);
    double t2 = session_now();
    fputc('\n', stdout);
    if (!rc) {
        report("prompt", n_prompt, t1 - t0);
        report("generation", made, t2 - t1);
    }
    if (!rc && o.logits_out) {
        size_t n = (size_t)s.engine.n_vocab;
        const float *logits = engine_logits(&s.engine, &e);
        FILE *f = logits ? fopen(o.logits_out, "wb") : NULL;
        if (!logits)
            rc = -1;
        else if (!f || fwrite(logits, sizeof(float), n, f) != n || fclose(f) != 0)
            rc = fail(&e, "%s: cannot write the logits", o.logits_out);
    }
    session_close(&s);
    free(from_file);
    return rc ? die("run: %s", e.msg) : 0;
}

/* One turn: the user's message (after the system message on the first
 * turn), the reply streamed to stdout, and the turn closed in the context
 * as the template closes it. */
static int chat_turn(struct session *s, const struct session_options *o, const struct chat_template *t,
                     const char *system, const char *message, struct error *e)
{
    size_t n = 2 * (strlen(message) + (system ? strlen(system) : 0)) + 256;
    char *text = malloc(n), *joined = NULL;
    if (!text)
        return fail(e, "out of memory");
    size_t len = 0;
    int rc = 0;
    if (system && system[0] && chat_system_turn(t)) {
        rc = chat_message(t, "system", system, text, n);
        len = strlen(text);
    } else if (system && system[0]) { /* the format has no system turn: the first user turn starts with it */
        size_t k = strlen(system) + strlen(message) + 3;
        if ((joined = malloc(k)))
            snprintf(joined, k, "%s\n\n%s", system, message), message = joined;
        else
            rc = -1;
    }
    if (!rc)
        rc = chat_message(t, "user", message, text + len, n - len);
    free(joined);
    if (!rc) {
        len = strlen(text);
        rc = chat_reply_prefix(t, text + len, n - len);
    }
    rc = rc ? fail(e, "the message does not fit its buffer") : session_feed(s, o, text, e);
    free(text);
    int64_t made;
    if (!rc)
        rc = session_generate(s, o, o->n_predict, stdout, &made, e);
    int32_t end = tokenizer_find(&s->tok, chat_end_of_turn(t), strlen(chat_end_of_turn(t)));
    if (!rc && (s->n_history == 0 || s->history[s->n_history - 1] != end))
        rc = session_feed(s, o, chat_end_of_turn(t), e);
    if (!rc && chat_after_turn(t)[0])
        rc = session_feed(s, o, chat_after_turn(t), e);
    fputc('\n', stdout);
    fflush(stdout);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return fputs(chat_usage, stdout), 0;
    struct session_options o;
    if (session_parse("chat", argc, argv, &o))
        return 1;
    struct session s;
    struct error e;
    if (session_open(&s, &o, &e))
        return die("%s", e.msg);
    struct chat_template t;
    if (chat_template_detect(&s.model.gguf, o.chat_template, &t, &e)) {
        session_close(&s);
        return die("chat: %s: %s", o.model, e.msg);
    }
    session_announce(&s, &o);
    const char *system = o.system ? o.system : t.default_system;
    fprintf(stderr, "chat: %s format%s%s%s\n", chat_format_name(t.format), system[0] ? ", system message \"" : "",
            system, system[0] ? "\"" : "");
    if (system[0])
        o.n_keep = 0; /* the system turn's length is known only after the first turn */
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    bool first = true;
    ssize_t got;
    bool tty = isatty(0) && isatty(2);
    while (!rc) {
        if (tty)
            fputs("> ", stderr);
        if ((got = getline(&line, &cap, stdin)) <= 0)
            break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (got == 0)
            break;
        rc = chat_turn(&s, &o, &t, first ? system : NULL, line, &e);
        if (first && system[0])
            o.n_keep = (int64_t)s.n_history; /* a context shift keeps at least the first turn's start */
        first = false;
    }
    free(line);
    session_close(&s);
    return rc ? die("chat: %s", e.msg) : 0;
}
