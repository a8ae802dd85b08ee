/* describe.c: the sandbox and the description vocabulary (see describe.h). */
#include "describe.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMORY_LIMIT (256u << 20)      /* bytes a description may allocate */
#define INSTRUCTION_LIMIT 100000000ll  /* Lua instructions it may run */
#define HOOK_EVERY 10000

struct sandbox {
    size_t used;
    long long budget;
};

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct sandbox *sb = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        sb->used -= old;
        free(ptr);
        return NULL;
    }
    if (nsize > old && sb->used + (nsize - old) > MEMORY_LIMIT)
        return NULL; /* Lua reports "not enough memory" at the allocation site */
    void *p = realloc(ptr, nsize);
    if (p)
        sb->used = sb->used - old + nsize;
    return p;
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    struct sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    sb->budget -= HOOK_EVERY;
    if (sb->budget < 0) {
        luaL_where(L, 0); /* in a hook, level 0 is the Lua function that was running */
        lua_pushfstring(L, "the description ran for more than %d instructions (an endless loop?)", (int)INSTRUCTION_LIMIT);
        lua_concat(L, 2);
        lua_error(L);
    }
}

struct ir *describe_ir(lua_State *L) { return *(struct ir **)lua_getextraspace(L); }

static int caller_line(lua_State *L)
{
    lua_Debug ar;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "l", &ar))
        return ar.currentline;
    return 0;
}

/* A descriptor: a table tagged with what made it and the line it was made on. */
static void new_descriptor(lua_State *L, const char *kind)
{
    lua_newtable(L);
    lua_pushstring(L, kind);
    lua_setfield(L, -2, "__minfer");
    lua_pushinteger(L, caller_line(L));
    lua_setfield(L, -2, "__line");
}

/* gguf(key [, opts]) */
static int dsl_gguf(lua_State *L)
{
    const char *key = luaL_checkstring(L, 1);
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_gettop(L) > 2)
        return luaL_error(L, "gguf takes a key and an options table, got %d arguments", lua_gettop(L));
    bool has_opts = !lua_isnoneornil(L, 2);
    new_descriptor(L, "gguf");
    lua_pushstring(L, key);
    lua_setfield(L, -2, "key");
    if (has_opts) {
        lua_pushvalue(L, 2);
        lua_setfield(L, -2, "opts");
    }
    return 1;
}

/* derived(text [, opts]) and array_length(key) */
static int dsl_derived(lua_State *L)
{
    const char *text = luaL_checkstring(L, 1);
    luaL_argcheck(L, lua_gettop(L) <= 2, 3, "derived takes an expression and an options table");
    if (!lua_isnoneornil(L, 2))
        luaL_checktype(L, 2, LUA_TTABLE);
    bool has_opts = !lua_isnoneornil(L, 2);
    new_descriptor(L, "derived");
    lua_pushstring(L, text);
    lua_setfield(L, -2, "expr");
    if (has_opts) {
        lua_pushvalue(L, 2);
        lua_setfield(L, -2, "opts");
    }
    return 1;
}

static int dsl_array_length(lua_State *L)
{
    const char *key = luaL_checkstring(L, 1);
    luaL_argcheck(L, lua_gettop(L) == 1, 2, "array_length takes one key");
    new_descriptor(L, "array_length");
    lua_pushstring(L, key);
    lua_setfield(L, -2, "key");
    return 1;
}

/* tensor(pattern, shape [, opts]) */
static int dsl_tensor(lua_State *L)
{
    const char *pattern = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    if (lua_gettop(L) > 3)
        return luaL_error(L, "tensor takes a name pattern, a shape and an options table, got %d arguments",
                          lua_gettop(L));
    bool has_opts = !lua_isnoneornil(L, 3);
    new_descriptor(L, "tensor");
    lua_pushstring(L, pattern);
    lua_setfield(L, -2, "pattern");
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "shape");
    if (has_opts) {
        lua_pushvalue(L, 3);
        lua_setfield(L, -2, "opts");
    }
    return 1;
}

/* arch { ... }: marks the table with its line. */
static int dsl_arch(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argcheck(L, lua_gettop(L) == 1, 2, "arch takes one table");
    lua_pushinteger(L, caller_line(L));
    lua_setfield(L, 1, "__line");
    lua_pushvalue(L, 1);
    return 1;
}

static lua_State *new_sandbox(struct sandbox *sb)
{
    lua_State *L = lua_newstate(limited_alloc, sb);
    if (!L)
        return NULL;
    static const luaL_Reg libs[] = { { LUA_GNAME, luaopen_base },    { LUA_STRLIBNAME, luaopen_string },
                                     { LUA_TABLIBNAME, luaopen_table }, { LUA_MATHLIBNAME, luaopen_math },
                                     { LUA_UTF8LIBNAME, luaopen_utf8 } };
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    static const char *const removed[] = { "dofile", "loadfile", "load", "require", "collectgarbage", "print" };
    for (size_t i = 0; i < sizeof removed / sizeof removed[0]; i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    static const luaL_Reg dsl[] = { { "arch", dsl_arch },       { "gguf", dsl_gguf },   { "derived", dsl_derived },
                                    { "array_length", dsl_array_length }, { "tensor", dsl_tensor } };
    for (size_t i = 0; i < sizeof dsl / sizeof dsl[0]; i++) {
        lua_pushcfunction(L, dsl[i].func);
        lua_setglobal(L, dsl[i].name);
    }
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
    return L;
}

/* ---- reading the description's tables into the IR ---- */

struct entry {
    char name[64];
    int line;
    int index; /* absolute stack index of the value */
};

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return x->line != y->line ? (x->line < y->line ? -1 : 1) : strcmp(x->name, y->name);
}

static bool is_identifier(const char *s)
{
    if (!*s || strlen(s) > 31 || !(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

struct reader {
    lua_State *L;
    struct ir *ir;
    struct error *e;
    const char *file;
    int arch_line;
};

/* Fails with "file:line: message" (line 0: the arch table's line). */
static int rfail(struct reader *r, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int rfail(struct reader *r, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail(r->e, "%s:%d: %s", r->file, line ? line : r->arch_line, msg);
}

static int field_int(lua_State *L, int t, const char *k)
{
    lua_getfield(L, t, k);
    int v = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* Collects a table's entries (string keys), sorted by line: Lua's own
 * iteration order is not reproducible, and the output must be. The values
 * stay on the stack; the caller pops n of them. */
static int collect(struct reader *r, int table, const char *what, struct entry *out, int max, int *n)
{
    lua_State *L = r->L;
    *n = 0;
    lua_pushnil(L);
    while (lua_next(L, table)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 2);
            return rfail(r, 0, "%s: keys must be names, found a %s key", what, luaL_typename(L, -2));
        }
        if (*n == max) {
            lua_pop(L, 2);
            return rfail(r, 0, "%s: more than %s entries", what, max == IR_MAX_HPARAMS ? "48" : "64");
        }
        struct entry *en = &out[(*n)++];
        snprintf(en->name, sizeof en->name, "%s", lua_tostring(L, -2));
        en->line = lua_istable(L, -1) ? field_int(L, lua_gettop(L), "__line") : 0;
        /* keep the value: move it below the key */
        lua_insert(L, -2);
        en->index = lua_gettop(L) - 1;
    }
    qsort(out, (size_t)*n, sizeof *out, cmp_entry);
    return 0;
}

static const char *descriptor_kind(lua_State *L, int idx)
{
    if (!lua_istable(L, idx))
        return NULL;
    lua_getfield(L, idx, "__minfer");
    const char *k = lua_tostring(L, -1);
    lua_pop(L, 1);
    return k; /* interned in the table; stays valid while it does */
}

static int lookup_hparam(const char *name, void *ctx)
{
    struct ir *ir = ctx;
    int i = ir_find_hparam(ir, name);
    if (i >= 0 && ir->hp[i].kind != HP_INT)
        return -1;
    if (strcmp(name, "nt") == 0)
        return IR_SYM_NT;
    return i;
}

static void substitute_arch(const char *in, const char *arch, char *out, size_t n)
{
    const char *at = strstr(in, "{arch}");
    if (at)
        snprintf(out, n, "%.*s%s%s", (int)(at - in), in, arch, at + 6);
    else
        snprintf(out, n, "%s", in);
}

static int read_hparam(struct reader *r, const struct entry *en)
{
    lua_State *L = r->L;
    struct ir *ir = r->ir;
    struct ir_hparam *hp = &ir->hp[ir->n_hp];
    memset(hp, 0, sizeof *hp);
    const char *kind = descriptor_kind(L, en->index);
    if (!is_identifier(en->name))
        return rfail(r, en->line, "hparam '%s': not a valid C identifier", en->name);
    if (!kind || strcmp(kind, "tensor") == 0)
        return rfail(r, en->line, "hparam '%s': expected gguf(...), derived(...) or array_length(...), got %s",
                     en->name, kind ? "tensor(...)" : luaL_typename(L, en->index));
    snprintf(hp->name, sizeof hp->name, "%.31s", en->name);
    hp->line = en->line;
    hp->kind = HP_INT;
    hp->source = strcmp(kind, "gguf") == 0 ? HP_GGUF : strcmp(kind, "derived") == 0 ? HP_DERIVED : HP_ARRAY_LENGTH;
    const char *def = NULL;
    char number[48];
    double fdef = 0;
    bool has_fdef = false;
    if (hp->source == HP_DERIVED) {
        lua_getfield(L, en->index, "expr");
        def = lua_tostring(L, -1);
        lua_pop(L, 1);
    } else {
        lua_getfield(L, en->index, "key");
        substitute_arch(lua_tostring(L, -1), ir->gguf_arch, hp->key, sizeof hp->key);
        lua_pop(L, 1);
    }
    lua_getfield(L, en->index, "opts");
    if (lua_istable(L, -1)) {
        int opts = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, opts)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(k, "type") == 0) {
                const char *t = lua_tostring(L, -1);
                if (!t || (strcmp(t, "u32") && strcmp(t, "f32")))
                    return rfail(r, en->line, "hparam '%s': type must be \"u32\" or \"f32\", got %s", en->name,
                                 t ? t : luaL_typename(L, -1));
                hp->kind = strcmp(t, "f32") == 0 ? HP_FLOAT : HP_INT;
            } else if (strcmp(k, "default") == 0) {
                if (lua_type(L, -1) == LUA_TNUMBER) {
                    fdef = lua_tonumber(L, -1);
                    has_fdef = true;
                    if (lua_isinteger(L, -1))
                        snprintf(number, sizeof number, "%lld", (long long)lua_tointeger(L, -1));
                    else
                        snprintf(number, sizeof number, "%.17g", fdef);
                    def = number;
                } else if (lua_type(L, -1) == LUA_TSTRING)
                    def = lua_tostring(L, -1);
                else
                    return rfail(r, en->line, "hparam '%s': default must be a number or an expression, got %s",
                                 en->name, luaL_typename(L, -1));
            } else
                return rfail(r, en->line, "hparam '%s': unknown option '%s' (known: type, default)", en->name, k);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (hp->kind == HP_FLOAT && hp->source == HP_ARRAY_LENGTH)
        return rfail(r, en->line, "hparam '%s': an array length is an integer, not f32", en->name);
    if (hp->kind == HP_FLOAT && hp->source == HP_GGUF) {
        if (def && !has_fdef)
            return rfail(r, en->line, "hparam '%s': an f32 default must be a number, got \"%s\"", en->name, def);
        hp->has_default = has_fdef;
        hp->fdef = fdef;
    } else if (def) {
        char err[160];
        ir->n_hp++; /* visible to its own lookup only to report self-reference */
        int rc = ast_parse(def, lookup_hparam, ir, &hp->def, err, sizeof err);
        ir->n_hp--;
        if (rc == 0 && (ast_symbols(&hp->def) & (1ull << ir->n_hp)))
            return rfail(r, en->line, "hparam '%s': its default refers to itself", en->name);
        if (rc)
            return rfail(r, en->line, "hparam '%s': default: %s", en->name, err);
        if (ast_symbols(&hp->def) & (1ull << IR_SYM_NT))
            return rfail(r, en->line, "hparam '%s': a default cannot depend on the token count nt", en->name);
        if (hp->kind == HP_INT && ast_has(&hp->def, "q"))
            return rfail(r, en->line, "hparam '%s': sqrt(...) makes an f32 value: declare it with { type = \"f32\" }",
                         en->name);
        hp->has_default = true;
        snprintf(hp->def_text, sizeof hp->def_text, "%s", def);
    }
    if (ir_find_hparam(ir, hp->name) >= 0)
        return rfail(r, en->line, "hparam '%s' declared twice", en->name);
    ir->n_hp++;
    return 0;
}

static int read_shape(struct reader *r, struct ir_tensor *t, int shape_idx, const char *name)
{
    lua_State *L = r->L;
    lua_Integer n = luaL_len(L, shape_idx);
    if (n < 1 || n > 4)
        return rfail(r, t->line, "tensor '%s': shape must have 1 to 4 dimensions", name);
    t->n_dims = (int)n;
    for (int d = 0; d < t->n_dims; d++) {
        lua_geti(L, shape_idx, d + 1);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            return rfail(r, t->line, "tensor '%s': shape entries must be expressions, got %s", name,
                         luaL_typename(L, -1));
        snprintf(t->ne_text[d], sizeof t->ne_text[d], "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        struct ast a;
        char err[160], msg[300];
        if (ast_parse(t->ne_text[d], lookup_hparam, r->ir, &a, err, sizeof err) ||
            ast_to_expr(&a, &t->ne[d], err, sizeof err)) {
            snprintf(msg, sizeof msg, "shape \"%s\": %s", t->ne_text[d], err);
            return rfail(r, t->line, "tensor '%s': %s", name, msg);
        }
    }
    return 0;
}

static int read_tensor(struct reader *r, const struct entry *en, bool per_layer)
{
    lua_State *L = r->L;
    struct ir *ir = r->ir;
    if (ir->n_t == IR_MAX_TENSORS)
        return rfail(r, en->line, "tensor '%s': more than 64 tensors", en->name);
    struct ir_tensor *t = &ir->t[ir->n_t];
    memset(t, 0, sizeof *t);
    t->line = en->line;
    t->per_layer = per_layer;
    t->fallback = -1;
    const char *kind = descriptor_kind(L, en->index);
    if (!kind || strcmp(kind, "tensor"))
        return rfail(r, en->line, "tensor '%s': expected tensor(...), got %s", en->name,
                     kind ? kind : luaL_typename(L, en->index));
    if (!is_identifier(en->name) || ir_find_tensor(ir, en->name) >= 0)
        return rfail(r, en->line, "tensor '%s': %s", en->name,
                     is_identifier(en->name) ? "declared twice" : "not a valid C identifier");
    snprintf(t->field, sizeof t->field, "%.31s", en->name);
    lua_getfield(L, en->index, "pattern");
    snprintf(t->pattern, sizeof t->pattern, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    const char *pct = strchr(t->pattern, '%');
    bool one_d = pct && pct[1] == 'd' && !strchr(pct + 2, '%');
    if (per_layer && !one_d)
        return rfail(r, en->line, "layer tensor '%s': name pattern \"%s\" needs exactly one %%d for the layer number",
                     en->name, t->pattern);
    if (!per_layer && pct)
        return rfail(r, en->line, "tensor '%s': name \"%s\" has a %% but only layer tensors are numbered",
                     en->name, t->pattern);
    lua_getfield(L, en->index, "shape");
    if (read_shape(r, t, lua_gettop(L), en->name))
        return -1;
    lua_pop(L, 1);
    lua_getfield(L, en->index, "opts");
    if (lua_istable(L, -1)) {
        int opts = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, opts)) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
            if (strcmp(k, "optional") == 0)
                t->optional = lua_toboolean(L, -1);
            else if (strcmp(k, "fallback") == 0) {
                const char *f = lua_tostring(L, -1);
                t->fallback = f ? ir_find_tensor(ir, f) : -1;
                if (t->fallback < 0 || ir->t[t->fallback].per_layer != per_layer)
                    return rfail(r, en->line, "tensor '%s': fallback '%s' is not a tensor declared before it",
                                 en->name, f ? f : "?");
            } else
                return rfail(r, en->line, "tensor '%s': unknown option '%s' (known: optional, fallback)", en->name, k);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    if (t->fallback >= 0) {
        const struct ir_tensor *f = &ir->t[t->fallback];
        bool same = f->n_dims == t->n_dims;
        for (int d = 0; same && d < t->n_dims; d++)
            same = expr_eq(&f->ne[d], &t->ne[d]);
        if (!same)
            return rfail(r, en->line, "tensor '%s': fallback '%s' has a different shape", en->name, f->field);
    }
    ir->n_t++;
    return 0;
}

static int read_section(struct reader *r, int arch, const char *field, int kind)
{
    lua_State *L = r->L;
    lua_getfield(L, arch, field);
    if (!lua_istable(L, -1)) {
        int rc = kind == 1 && lua_isnil(L, -1) ? 0 /* no layer table: allowed */
                 : rfail(r, 0, "arch.%s must be a table, got %s", field, luaL_typename(L, -1));
        lua_pop(L, 1);
        return rc;
    }
    struct entry entries[IR_MAX_TENSORS];
    int n, top = lua_gettop(L);
    if (collect(r, top, field, entries, kind == 0 ? IR_MAX_HPARAMS : IR_MAX_TENSORS, &n))
        return -1;
    for (int i = 0; i < n; i++) {
        int rc = kind == 0 ? read_hparam(r, &entries[i]) : read_tensor(r, &entries[i], kind == 1);
        if (rc)
            return -1;
    }
    lua_settop(L, top - 1);
    return 0;
}

static int check_fields(struct reader *r, int arch)
{
    static const char *const known[] = { "gguf_name", "hparams", "tensors", "layer", "forward", "__line" };
    lua_State *L = r->L;
    lua_pushnil(L);
    while (lua_next(L, arch)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok = ok || strcmp(k, known[i]) == 0;
        if (!ok) {
            char key[64];
            snprintf(key, sizeof key, "%s", k);
            lua_pop(L, 1);
            return rfail(r, 0, "arch: unknown field '%s' (known: gguf_name, hparams, tensors, layer, forward)", key);
        }
    }
    return 0;
}

static int read_arch(struct reader *r)
{
    lua_State *L = r->L;
    int arch = lua_gettop(L);
    if (!lua_istable(L, arch))
        return fail(r->e, "%s: the description must return arch { ... }, it returned %s", r->file,
                    luaL_typename(L, arch));
    r->arch_line = field_int(L, arch, "__line");
    if (check_fields(r, arch))
        return -1;
    lua_getfield(L, arch, "gguf_name");
    const char *g = lua_tostring(L, -1);
    if (!g || !is_identifier(g))
        return rfail(r, 0, "arch.gguf_name must be the GGUF general.architecture name, got %s", g ? g : "nothing");
    snprintf(r->ir->gguf_arch, sizeof r->ir->gguf_arch, "%s", g);
    lua_pop(L, 1);
    if (read_section(r, arch, "hparams", 0) || read_section(r, arch, "tensors", 2) ||
        read_section(r, arch, "layer", 1))
        return -1;
    /* the engine's default context: every description states the model's */
    int ctx = ir_find_hparam(r->ir, "n_ctx");
    if (ctx < 0 || r->ir->hp[ctx].kind != HP_INT)
        return rfail(r, 0, "arch.hparams must declare n_ctx, the model's training context (an integer "
                           "hyperparameter, e.g. n_ctx = gguf \"{arch}.context_length\")");
    r->ir->n_ctx_hp = ctx;
    r->ir->n_layer_hp = -1;
    lua_getfield(L, arch, "forward");
    if (!lua_isfunction(L, -1))
        return rfail(r, 0, "arch.forward must be a function, got %s", luaL_typename(L, -1));
    lua_setfield(L, LUA_REGISTRYINDEX, DESCRIBE_FORWARD);
    return 0;
}

static void stem(const char *path, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strcspn(base, ".");
    snprintf(out, n, "%.*s", (int)len, base);
}

int describe_load(struct ir *ir, const char *path, lua_State **out, struct error *e)
{
    static struct sandbox sb;
    sb = (struct sandbox){ 0, INSTRUCTION_LIMIT };
    *out = NULL;
    memset(ir, 0, sizeof *ir);
    snprintf(ir->file, sizeof ir->file, "%s", path);
    stem(path, ir->name, sizeof ir->name);
    if (!is_identifier(ir->name))
        return fail(e, "%s: the file name must be a C identifier plus .lua (it names the architecture)", path);
    lua_State *L = new_sandbox(&sb);
    if (!L)
        return fail(e, "%s: cannot create a Lua state", path);
    *(struct ir **)lua_getextraspace(L) = ir;
    if (luaL_loadfilex(L, path, "t") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
        fail(e, "%s", lua_tostring(L, -1));
        lua_close(L);
        return -1;
    }
    struct reader r = { L, ir, e, path, 0 };
    if (read_arch(&r)) {
        lua_close(L);
        return -1;
    }
    lua_settop(L, 0);
    *out = L;
    return 0;
}
