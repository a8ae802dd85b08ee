/* die.c: the subcommands' one way to report an error (see cli.h). */
#include <stdarg.h>
#include <stdio.h>

#include "cli/cli.h"

int die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("minfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}
