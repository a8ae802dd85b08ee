/* main.c: minfer-compile, the architecture compiler.
 *
 *   minfer-compile [ARCH.lua] [--out DIR] [--specialize PRESET|FILE.gguf --prefix P]
 *                  [--templates DIR] [--dump-ir] [--dot FILE]
 *   minfer-compile --registry OUT.c [--templates DIR] PREFIX...
 *   minfer-compile --arch-of PRESET|FILE.gguf     (prints the architecture it needs)
 *
 * Loads the description (sandboxed), traces forward into IR, checks shapes,
 * fuses, plans memory and emits generated C into DIR. Specializing without
 * a description uses archs/<architecture>.lua, named after the GGUF
 * general.architecture the preset or file has. */
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "describe.h"
#include "dump.h"
#include "emit.h"
#include "pass_fuse.h"
#include "pass_plan.h"
#include "pass_shape.h"
#include "specialize.h"
#include "trace.h"

struct options {
    const char *arch, *out, *dot, *specialize, *prefix, *templates, *registry, *arch_of;
    bool dump, no_fuse;
    const char *rest[64];
    int n_rest;
};

static const char usage[] =
    "usage: minfer-compile ARCH.lua [--out DIR] [--specialize PRESET|FILE.gguf --prefix P] [--templates DIR]\n"
    "                      [--dump-ir] [--dot FILE] [--no-fuse]\n"
    "       minfer-compile --registry OUT.c [--templates DIR] PREFIX...\n"
    "       minfer-compile --arch-of PRESET|FILE.gguf\n";

static int parse(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    o->templates = "templates";
    static const char *const valued[] = { "--out", "--dot", "--specialize", "--prefix", "--templates", "--registry",
                                          "--arch-of" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int v = -1;
        for (int k = 0; k < 7; k++)
            if (strcmp(a, valued[k]) == 0)
                v = k;
        if (strcmp(a, "--dump-ir") == 0)
            o->dump = true;
        else if (strcmp(a, "--no-fuse") == 0)
            o->no_fuse = true;
        else if (strcmp(a, "--help") == 0)
            return fputs(usage, stdout), 1;
        else if (v >= 0) {
            if (i + 1 >= argc)
                return fprintf(stderr, "minfer-compile: %s needs a value\n", a), -1;
            const char **slot[] = { &o->out, &o->dot, &o->specialize, &o->prefix, &o->templates, &o->registry, &o->arch_of };
            *slot[v] = argv[++i];
        } else if (a[0] == '-')
            return fprintf(stderr, "minfer-compile: unknown option '%s'\n%s", a, usage), -1;
        else if (o->n_rest < 64)
            o->rest[o->n_rest++] = a;
    }
    if (o->registry || o->arch_of)
        return 0;
    if (o->n_rest > 1 || (o->n_rest == 0 && !o->specialize))
        return fprintf(stderr, "minfer-compile: give exactly one description\n%s", usage), -1;
    o->arch = o->n_rest ? o->rest[0] : NULL;
    if (o->specialize && !o->prefix)
        return fprintf(stderr, "minfer-compile: --specialize needs --prefix\n"), -1;
    return 0;
}

static struct ir ir;
static struct plan plan;

static int compile(const struct options *o, struct error *e)
{
    lua_State *L;
    char path[128];
    if (!o->arch) { /* a specialized build names the description by its GGUF architecture */
        char arch[64];
        if (specialize_arch(o->specialize, arch, sizeof arch, e))
            return -1;
        snprintf(path, sizeof path, "archs/%s.lua", arch);
    }
    if (describe_load(&ir, o->arch ? o->arch : path, &L, e))
        return -1;
    int rc = trace_forward(L, &ir, e) || pass_shape(&ir, e);
    lua_close(L);
    if (rc)
        return -1;
    if (o->dump)
        dump_ir(stdout, &ir, "after trace and shape check");
    FILE *dot = NULL;
    if (o->dot) {
        if (!(dot = fopen(o->dot, "w")))
            return fail(e, "%s: cannot write", o->dot);
        dump_dot_begin(dot, &ir);
        dump_dot_layer(dot, &ir, "one layer before fusion", 0);
    }
    if (!o->no_fuse) /* --no-fuse: the ops as the description wrote them (the tests compare the two) */
        pass_fuse(&ir, NULL);
    if (pass_shape(&ir, e))
        return fail_prefix(e, "after fusion");
    if (dot) {
        dump_dot_layer(dot, &ir, "after fusion", 1);
        dump_dot_end(dot);
        fclose(dot);
    }
    if (o->dump)
        dump_ir(stdout, &ir, "after fusion");
    if (o->specialize && specialize(&ir, o->specialize, e))
        return -1;
    if (pass_plan(&ir, &plan, e))
        return -1;
    if (o->dump) {
        dump_ir(stdout, &ir, "after memory plan");
        for (int s = 0; s < plan.n_slots; s++)
            printf("slot %d: %s bytes\n", s, plan.size[s]);
    }
    if (o->out) {
        char label[256];
        if (o->specialize)
            specialize_label(o->specialize, label, sizeof label);
        return emit_arch(&ir, &plan, o->prefix ? o->prefix : ir.name, o->specialize ? label : NULL, o->templates, o->out, e);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    int p = parse(argc, argv, &o);
    if (p)
        return p > 0 ? 0 : 2;
    struct error e;
    int rc;
    if (o.arch_of) {
        char arch[64];
        rc = specialize_arch(o.arch_of, arch, sizeof arch, &e);
        if (!rc)
            puts(arch);
    } else if (o.registry)
        rc = emit_registry(o.rest, o.n_rest, o.templates, o.registry, &e);
    else
        rc = compile(&o, &e);
    if (rc) {
        fprintf(stderr, "minfer-compile: %s\n", e.msg);
        return 1;
    }
    return 0;
}
