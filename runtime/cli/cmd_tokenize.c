/* cmd_tokenize.c: `minfer tokenize`, like llama.cpp's llama-tokenize: the
 * tokens of a text (special tokens recognized, BOS where the vocabulary
 * asks for it, as `run` tokenizes a prompt), each as its id and text, or
 * the ids alone as a list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/session.h"

static const char usage[] =
    "usage: minfer tokenize -m FILE (-p TEXT | -f FILE) [--ids] [--no-bos]\n"
    "  prints each token as 'id -> 'text'', or with --ids the ids alone as [a, b, ...]\n";

/* A token's bytes, quoted for one line: control bytes as escapes. */
static void print_piece(const struct tokenizer *t, int32_t id)
{
    char buf[256];
    size_t n = tokenizer_piece(t, id, buf, sizeof buf);
    if (n > sizeof buf)
        n = sizeof buf;
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *file = NULL;
    bool ids_only = false, bos = true;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return fputs(usage, stdout), 0;
        if ((strcmp(a, "-m") == 0 || strcmp(a, "-p") == 0 || strcmp(a, "-f") == 0) && !v)
            return die("tokenize: %s needs a value", a);
        if (strcmp(a, "-m") == 0)
            model = argv[++i];
        else if (strcmp(a, "-p") == 0)
            text = argv[++i];
        else if (strcmp(a, "-f") == 0)
            file = argv[++i];
        else if (strcmp(a, "--ids") == 0)
            ids_only = true;
        else if (strcmp(a, "--no-bos") == 0)
            bos = false;
        else
            return die("tokenize: unknown option '%s' (try minfer tokenize --help)", a);
    }
    if (!model)
        return die("tokenize: -m FILE is required");
    if (!text == !file)
        return die("tokenize: give the text with -p TEXT or -f FILE (one of them)");
    struct error e;
    char *from_file = NULL;
    if (file && read_text_file(file, &from_file, &e))
        return die("tokenize: %s", e.msg);
    struct gguf g;
    struct tokenizer t;
    if (gguf_open(&g, model, &e)) {
        free(from_file);
        return die("tokenize: %s", e.msg);
    }
    if (tokenizer_load(&t, &g, &e)) {
        gguf_free(&g);
        free(from_file);
        return die("tokenize: %s: %s", model, e.msg);
    }
    const char *s = file ? from_file : text;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = bos && t.add_bos ? tokenizer_push_bos(&t, &ids, &n, &cap, &e) : 0;
    if (!rc)
        rc = tokenizer_encode(&t, s, strlen(s), true, &ids, &n, &cap, &e);
    if (!rc && ids_only) {
        putchar('[');
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        puts("]");
    }
    for (size_t i = 0; !rc && !ids_only && i < n; i++) {
        printf("%6d -> ", ids[i]);
        print_piece(&t, ids[i]);
        putchar('\n');
    }
    free(ids);
    tokenizer_free(&t);
    gguf_free(&g);
    free(from_file);
    return rc ? die("tokenize: %s", e.msg) : 0;
}
