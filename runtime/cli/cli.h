/* cli.h: the minfer subcommands. Each takes the arguments after its name and
 * returns the process exit status; errors are printed as one line on stderr. */
#ifndef MINFER_CLI_H
#define MINFER_CLI_H

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Prints "minfer: <message>" on stderr and returns 1, for `return die(...)`. */
int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
