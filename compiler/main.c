/* main.c: minfer-compile, the architecture compiler.
 *
 * usage: minfer-compile ARCH.lua [--out DIR] [--dump-ir] [--dot FILE]
 *
 * Loads the description (sandboxed), traces forward into IR, checks shapes,
 * and prints or writes what was asked for. */
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "describe.h"
#include "dump.h"
#include "pass_fuse.h"
#include "pass_shape.h"
#include "trace.h"

struct options {
    const char *arch, *out, *dot;
    bool dump;
};

static int usage(void)
{
    fprintf(stderr, "usage: minfer-compile ARCH.lua [--out DIR] [--dump-ir] [--dot FILE]\n");
    return 2;
}

static int parse(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--dump-ir") == 0)
            o->dump = true;
        else if ((strcmp(a, "--out") == 0 || strcmp(a, "--dot") == 0) && i + 1 < argc)
            *(a[2] == 'o' ? &o->out : &o->dot) = argv[++i];
        else if (a[0] == '-') {
            fprintf(stderr, "minfer-compile: unknown or incomplete option '%s'\n", a);
            return -1;
        } else if (o->arch) {
            fprintf(stderr, "minfer-compile: more than one description ('%s' and '%s')\n", o->arch, a);
            return -1;
        } else
            o->arch = a;
    }
    if (!o->arch) {
        usage();
        return -1;
    }
    return 0;
}

static struct ir ir;

int main(int argc, char **argv)
{
    struct options o;
    if (parse(argc, argv, &o))
        return 2;
    struct error e;
    lua_State *L;
    if (describe_load(&ir, o.arch, &L, &e)) {
        fprintf(stderr, "minfer-compile: %s\n", e.msg);
        return 1;
    }
    int rc = trace_forward(L, &ir, &e) || pass_shape(&ir, &e);
    lua_close(L);
    if (rc) {
        fprintf(stderr, "minfer-compile: %s\n", e.msg);
        return 1;
    }
    if (o.dump)
        dump_ir(stdout, &ir, "after trace and shape check");
    FILE *dot = NULL;
    if (o.dot) {
        dot = fopen(o.dot, "w");
        if (!dot) {
            fprintf(stderr, "minfer-compile: cannot write %s\n", o.dot);
            return 1;
        }
        dump_dot_begin(dot, &ir);
        dump_dot_layer(dot, &ir, "one layer before fusion", 0);
    }
    pass_fuse(&ir, NULL);
    if (pass_shape(&ir, &e)) {
        fprintf(stderr, "minfer-compile: after fusion: %s\n", e.msg);
        return 1;
    }
    if (o.dump)
        dump_ir(stdout, &ir, "after fusion");
    if (dot) {
        dump_dot_layer(dot, &ir, "after fusion", 1);
        dump_dot_end(dot);
        fclose(dot);
    }
    return 0;
}
