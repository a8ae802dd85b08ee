/* main.c: the minfer command line: dispatches to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define MINFER_VERSION "0.1.0"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *synopsis, *help;
} commands[] = {
    { "run", cmd_run, "run -m FILE -p TEXT [-n N]", "complete a prompt (see --help for sampling)" },
    { "chat", cmd_chat, "chat -m FILE [--system TEXT]", "talk, one message per input line" },
    { "bench", cmd_bench, "bench -m FILE [-p 512 -n 128]", "prompt and generation speed" },
    { "perplexity", cmd_perplexity, "perplexity -m FILE -f TEXT", "llama.cpp's perplexity over a text" },
    { "serve", cmd_serve, "serve -m FILE [--port 8080]", "an OpenAI-compatible HTTP server (see --help)" },
    { "tokenize", cmd_tokenize, "tokenize -m FILE -p TEXT [--ids]", "the tokens of a text" },
    { "info", cmd_info, "info FILE [--json]", "describe a GGUF file" },
    { "quantize", cmd_quantize, "quantize IN OUT --type T", "requantize a GGUF (types and mixes: see --help)" },
    { "synth", cmd_synth, "synth --preset P -o OUT", "write a random model of a known shape (see --help)" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: minfer COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  minfer %-34s %s\n", commands[i].synopsis, commands[i].help);
    fprintf(f, "\n`minfer COMMAND --help` describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr), 1;
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return usage(stdout), 0;
    if (strcmp(argv[1], "--version") == 0)
        return puts("minfer " MINFER_VERSION), 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    return die("unknown command '%s' (try minfer --help)", argv[1]);
}
