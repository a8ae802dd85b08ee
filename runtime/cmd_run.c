/* cmd_run.c: `minfer run` (complete a prompt) and `minfer chat` (ChatML
 * conversation reusing the KV cache across turns). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "session.h"

static const char run_usage[] =
    "usage: minfer run -m FILE (-p TEXT | -f FILE) [-n N] [-c N] [-b N] [-t N] [--temp T] [--top-k K] [--top-p P]\n"
    "                  [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S] [--cache-type f32|f16|q8_0]\n"
    "                  [--context-shift [--keep N]] [--logits-out FILE]\n"
    "  -n N   tokens to generate (default: until end of text or the context is full)\n"
    "  -c N   context size (default: the model's training context)\n"
    "  --temp 0 is greedy; --context-shift keeps the first --keep tokens and the newest half of the rest\n"
    "  --logits-out FILE writes the last logits as raw little-endian float32\n";

static const char chat_usage[] =
    "usage: minfer chat -m FILE [--system TEXT] [-n N] [-c N] [sampling flags as for run]\n"
    "  reads one user message per line from standard input; an empty line or end of input ends the chat\n";

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
    if (o.prompt_file) {
        FILE *f = fopen(o.prompt_file, "rb");
        if (!f)
            return die("run: %s: cannot open: %s", o.prompt_file, strerror(errno));
        size_t cap = 0, n = 0, got;
        char buf[65536];
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
            char *p = realloc(from_file, cap = n + got + 1);
            if (!p)
                return fclose(f), free(from_file), die("run: out of memory reading %s", o.prompt_file);
            from_file = p;
            memcpy(from_file + n, buf, got);
            n += got;
            from_file[n] = 0;
        }
        fclose(f);
        o.prompt = from_file ? from_file : "";
        (void)cap;
    }
    if (!o.prompt)
        return die("run: -p TEXT (or -f FILE) is required");
    struct session s;
    struct error e;
    if (session_open(&s, &o, &e))
        return free(from_file), die("%s", e.msg);
    double t0 = session_now();
    int rc = session_feed(&s, &o, o.prompt, &e);
    double t1 = session_now();
    int64_t made = 0;
    if (!rc)
        rc = session_generate(&s, &o, o.n_predict, stdout, &made, &e);
    double t2 = session_now();
    fputc('\n', stdout);
    if (!rc) {
        report("prompt", (int64_t)s.n_history - made, t1 - t0);
        report("generation", made, t2 - t1);
    }
    if (!rc && o.logits_out) {
        FILE *f = fopen(o.logits_out, "wb");
        size_t n = (size_t)s.engine.n_vocab;
        if (!f || fwrite(s.engine.logits, sizeof(float), n, f) != n || fclose(f) != 0)
            rc = fail(&e, "%s: cannot write the logits", o.logits_out);
    }
    session_close(&s);
    free(from_file);
    return rc ? die("run: %s", e.msg) : 0;
}

/* ChatML, the format Qwen models are trained on. */
static int chat_turn(struct session *s, const struct session_options *o, const char *message, bool first,
                     struct error *e)
{
    size_t n = strlen(message) + (o->system ? strlen(o->system) : 0) + 128;
    char *text = malloc(n);
    if (!text)
        return fail(e, "out of memory");
    int len = 0;
    if (first && o->system)
        len += snprintf(text + len, n - (size_t)len, "<|im_start|>system\n%s<|im_end|>\n", o->system);
    snprintf(text + len, n - (size_t)len, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", message);
    int rc = session_feed(s, o, text, e);
    free(text);
    int64_t made;
    if (!rc)
        rc = session_generate(s, o, o->n_predict, stdout, &made, e);
    /* close the turn in the context as the template does */
    if (!rc && (s->n_history == 0 || s->history[s->n_history - 1] != s->stop[1]))
        rc = session_feed(s, o, "<|im_end|>", e);
    if (!rc)
        rc = session_feed(s, o, "\n", e);
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
    if (o.system)
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
        rc = chat_turn(&s, &o, line, first, &e);
        if (first && o.system)
            o.n_keep = (int64_t)s.n_history; /* a context shift keeps at least the first turn's start */
        first = false;
    }
    free(line);
    session_close(&s);
    return rc ? die("chat: %s", e.msg) : 0;
}
