/* trace.c: the op vocabulary a description's forward is written against
 * (see trace.h and docs/adding-an-architecture.md). Each g.* function checks
 * its arguments and records one node; shapes are inferred afterwards by the
 * shape pass. Nodes remember the line that made them. */
#include "trace.h"

#include <lauxlib.h>
#include <string.h>

#include "describe.h"

#define NODE_MT "minfer.node"
#define WEIGHT_MT "minfer.weight"
#define HPARAM_MT "minfer.hparam"

struct trace_state {
    enum region region;
    bool in_layers;
};

static struct trace_state *state(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "minfer.trace");
    struct trace_state *s = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return s;
}

static int line_of_caller(lua_State *L)
{
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline > 0)
            return ar.currentline;
    }
    return 0;
}

static void push_handle(lua_State *L, const char *mt, int id)
{
    int *p = lua_newuserdatauv(L, sizeof *p, 0);
    *p = id;
    luaL_setmetatable(L, mt);
}

static void check_arity(lua_State *L, const char *fn, int want, const char *args)
{
    if (lua_gettop(L) != want)
        luaL_error(L, "g.%s takes %d argument%s (%s), got %d", fn, want, want == 1 ? "" : "s", args, lua_gettop(L));
}

static int check_node(lua_State *L, int arg, const char *fn)
{
    int *p = luaL_testudata(L, arg, NODE_MT);
    if (!p)
        luaL_error(L, "g.%s: argument %d must be a value from another g.* call, got %s", fn, arg,
                   luaL_typename(L, arg));
    struct ir *ir = describe_ir(L);
    const struct ir_node *n = &ir->node[*p];
    enum region now = state(L)->region;
    if (n->region == REGION_BODY && now != REGION_BODY) {
        bool carried = false;
        for (int i = 0; i < ir->n_carried; i++)
            carried = carried || ir->carried_out[i] == *p;
        if (!carried)
            luaL_error(L, "g.%s: argument %d was made inside g.layers; only the values its function returns "
                          "carry over", fn, arg);
    }
    if (n->op == OP_KV_STORE && strcmp(fn, "attention") != 0)
        luaL_error(L, "g.%s: argument %d is a kv_store result, which only g.attention takes", fn, arg);
    return *p;
}

static int check_weight(lua_State *L, int arg, const char *fn, bool optional_ok)
{
    int *p = luaL_testudata(L, arg, WEIGHT_MT);
    if (!p)
        luaL_error(L, "g.%s: argument %d must be a tensor (w.name or L.name), got %s", fn, arg, luaL_typename(L, arg));
    const struct ir_tensor *t = &describe_ir(L)->t[*p];
    if (t->optional && !optional_ok)
        luaL_error(L, "g.%s: tensor '%s' is optional; only g.add_bias accepts optional tensors", fn, t->field);
    return *p;
}

/* An op's parameter: a hyperparameter of the kind, or (per_layer_ok) a
 * value of g.per_layer. Sizes and counts must be the same on every layer. */
static int check_value(lua_State *L, int arg, const char *fn, enum hp_kind kind, bool per_layer_ok)
{
    int *p = luaL_testudata(L, arg, HPARAM_MT);
    const struct ir *ir = describe_ir(L);
    if (!p || ir->hp[*p].kind != kind)
        luaL_error(L, "g.%s: argument %d must be %s hyperparameter (hp.name%s), got %s", fn, arg,
                   kind == HP_FLOAT ? "an f32" : "an integer", per_layer_ok ? " or g.per_layer(...)" : "",
                   p ? (kind == HP_FLOAT ? "an integer one" : "an f32 one") : luaL_typename(L, arg));
    if (!per_layer_ok && ir->hp[*p].source == HP_LAYER)
        luaL_error(L, "g.%s: argument %d must be the same on every layer, not a g.per_layer value", fn, arg);
    if (ir->hp[*p].source == HP_LAYER && state(L)->region != REGION_BODY)
        luaL_error(L, "g.%s: argument %d is a g.per_layer value, which only ops inside g.layers take", fn, arg);
    return *p;
}

static int check_hparam(lua_State *L, int arg, const char *fn, enum hp_kind kind)
{
    return check_value(L, arg, fn, kind, false);
}

/* Records a node and pushes its handle. */
static int record(lua_State *L, int op, int n_src, const int *src, int n_w, const int *w)
{
    struct ir *ir = describe_ir(L);
    if (ir->n_node == IR_MAX_NODES)
        luaL_error(L, "the forward pass records more than %d nodes", IR_MAX_NODES);
    int id = ir->n_node++;
    struct ir_node *n = &ir->node[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_src = n_src;
    for (int i = 0; i < n_src; i++)
        n->src[i] = src[i];
    for (int i = 0; i < GRAPH_MAX_W; i++) {
        n->weight[i] = i < n_w ? w[i] : -1;
        n->bias[i] = -1;
    }
    n->eps = -1;
    n->rope_base = -1;
    n->scale = -1;
    n->window = -1;
    n->rope_factor = -1;
    n->alias = -1;
    n->slot = -1;
    n->region = state(L)->region;
    n->line = line_of_caller(L);
    push_handle(L, NODE_MT, id);
    return id;
}

static struct ir_node *last_node(lua_State *L) { return &describe_ir(L)->node[describe_ir(L)->n_node - 1]; }

static int g_tokens(lua_State *L)
{
    check_arity(L, "tokens", 0, "none");
    record(L, OP_TOKENS, 0, NULL, 0, NULL);
    return 1;
}

static int g_embed(lua_State *L)
{
    check_arity(L, "embed", 2, "weight, tokens");
    int w = check_weight(L, 1, "embed", false), x = check_node(L, 2, "embed");
    record(L, OP_EMBED, 1, &x, 1, &w);
    return 1;
}

static int norm_like(lua_State *L, const char *fn, int op)
{
    check_arity(L, fn, 3, "x, weight, eps");
    int x = check_node(L, 1, fn), w = check_weight(L, 2, fn, false), eps = check_value(L, 3, fn, HP_FLOAT, true);
    record(L, op, 1, &x, 1, &w);
    last_node(L)->eps = eps;
    return 1;
}

static int g_rms_norm(lua_State *L) { return norm_like(L, "rms_norm", OP_RMS_NORM); }
static int g_head_norm(lua_State *L) { return norm_like(L, "head_norm", OP_HEAD_NORM); }

static int g_matmul(lua_State *L)
{
    check_arity(L, "matmul", 2, "weight, x");
    int w = check_weight(L, 1, "matmul", false), x = check_node(L, 2, "matmul");
    record(L, OP_MATMUL, 1, &x, 1, &w);
    return 1;
}

static int binary(lua_State *L, const char *fn, int op)
{
    check_arity(L, fn, 2, "a, b");
    int src[2] = { check_node(L, 1, fn), check_node(L, 2, fn) };
    record(L, op, 2, src, 0, NULL);
    return 1;
}

static int g_add(lua_State *L) { return binary(L, "add", OP_ADD); }
static int g_mul(lua_State *L) { return binary(L, "mul", OP_MUL); }

static int g_add_bias(lua_State *L)
{
    check_arity(L, "add_bias", 2, "x, bias");
    int x = check_node(L, 1, "add_bias"), w = check_weight(L, 2, "add_bias", true);
    record(L, OP_ADD_BIAS, 1, &x, 0, NULL);
    last_node(L)->bias[0] = w;
    return 1;
}

static int unary(lua_State *L, const char *fn, int op)
{
    check_arity(L, fn, 1, "x");
    int x = check_node(L, 1, fn);
    record(L, op, 1, &x, 0, NULL);
    return 1;
}

static int g_silu(lua_State *L) { return unary(L, "silu", OP_SILU); }
static int g_gelu(lua_State *L) { return unary(L, "gelu", OP_GELU); }
static int g_outputs(lua_State *L) { return unary(L, "outputs", OP_OUTPUTS); }

static int g_scale(lua_State *L)
{
    check_arity(L, "scale", 2, "x, factor");
    int x = check_node(L, 1, "scale"), f = check_value(L, 2, "scale", HP_FLOAT, true);
    record(L, OP_SCALE, 1, &x, 0, NULL);
    last_node(L)->scale = f;
    return 1;
}

static int g_heads(lua_State *L)
{
    check_arity(L, "heads", 2, "x, head size");
    int x = check_node(L, 1, "heads"), d = check_hparam(L, 2, "heads", HP_INT);
    record(L, OP_HEADS, 1, &x, 0, NULL);
    last_node(L)->head_dim = expr_sym(d);
    return 1;
}

static int g_rope(lua_State *L)
{
    if (lua_gettop(L) < 2 || lua_gettop(L) > 4)
        luaL_error(L, "g.rope takes 2 to 4 arguments (x, base[, \"neox\"|\"normal\"[, linear factor]]), got %d",
                   lua_gettop(L));
    int x = check_node(L, 1, "rope"), base = check_value(L, 2, "rope", HP_FLOAT, true);
    int factor = lua_gettop(L) == 4 ? check_value(L, 4, "rope", HP_FLOAT, true) : -1;
    int style = ROPE_NEOX;
    if (lua_gettop(L) >= 3) {
        const char *s = lua_tostring(L, 3);
        if (!s || (strcmp(s, "neox") && strcmp(s, "normal")))
            luaL_error(L, "g.rope: style must be \"neox\" or \"normal\", got %s", s ? s : luaL_typename(L, 3));
        style = strcmp(s, "normal") == 0 ? ROPE_NORMAL : ROPE_NEOX;
    }
    int src[2] = { x, describe_ir(L)->positions };
    record(L, OP_ROPE, 2, src, 0, NULL);
    last_node(L)->rope_base = base;
    last_node(L)->rope_style = style;
    last_node(L)->rope_factor = factor;
    return 1;
}

static int g_kv_store(lua_State *L)
{
    check_arity(L, "kv_store", 2, "k, v");
    if (!state(L)->in_layers)
        luaL_error(L, "g.kv_store: the KV cache is per layer; call it inside g.layers");
    int src[3] = { check_node(L, 1, "kv_store"), check_node(L, 2, "kv_store"), describe_ir(L)->positions };
    record(L, OP_KV_STORE, 3, src, 0, NULL);
    return 1;
}

static int g_attention(lua_State *L)
{
    if (lua_gettop(L) != 2 && lua_gettop(L) != 3)
        luaL_error(L, "g.attention takes 2 or 3 arguments (q, kv_store result[, window]), got %d", lua_gettop(L));
    int q = check_node(L, 1, "attention"), kv = check_node(L, 2, "attention");
    if (describe_ir(L)->node[kv].op != OP_KV_STORE)
        luaL_error(L, "g.attention: argument 2 must be the result of g.kv_store");
    int window = lua_gettop(L) == 3 ? check_value(L, 3, "attention", HP_INT, true) : -1;
    int src[4] = { q, kv, describe_ir(L)->positions, describe_ir(L)->kv_len };
    record(L, OP_ATTENTION, 4, src, 0, NULL);
    last_node(L)->window = window;
    return 1;
}

static int lookup_condition(const char *name, void *ctx)
{
    const struct ir *ir = ctx;
    if (strcmp(name, "layer") == 0)
        return IR_SYM_LAYER;
    int i = ir_find_hparam(ir, name);
    return i >= 0 && ir->hp[i].kind == HP_INT && ir->hp[i].source != HP_LAYER ? i : -1;
}

/* One choice of g.per_layer: a hyperparameter or a number. Returns its
 * kind, or -1 for an integer constant (which fits either). */
static int choice(lua_State *L, int arg, struct ir_hparam *v, int k)
{
    const struct ir *ir = describe_ir(L);
    int *p = luaL_testudata(L, arg, HPARAM_MT);
    v->choice_hp[k] = p ? *p : -1;
    if (p && ir->hp[*p].source == HP_LAYER)
        luaL_error(L, "g.per_layer: argument %d is itself a g.per_layer value", arg);
    if (p)
        return (int)ir->hp[*p].kind;
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_error(L, "g.per_layer: argument %d must be a hyperparameter (hp.name) or a number, got %s", arg,
                   luaL_typename(L, arg));
    v->choice_c[k] = lua_tonumber(L, arg);
    return lua_isinteger(L, arg) ? -1 : (int)HP_FLOAT;
}

/* g.per_layer(condition, a, b): a on the layers where the condition holds,
 * b on the others. The condition is text over integer hyperparameters and
 * `layer` (the layer's index from 0): + - * %, one comparison. */
static int g_per_layer(lua_State *L)
{
    check_arity(L, "per_layer", 3, "condition, value where it holds, value elsewhere");
    struct ir *ir = describe_ir(L);
    if (!state(L)->in_layers)
        luaL_error(L, "g.per_layer: a per-layer value is made inside g.layers");
    if (lua_type(L, 1) != LUA_TSTRING)
        luaL_error(L, "g.per_layer: argument 1 must be a condition such as \"(layer + 1) %% 6 == 0\", got %s",
                   luaL_typename(L, 1));
    if (ir->n_hp == IR_MAX_HPARAMS)
        luaL_error(L, "g.per_layer: more than %d hyperparameters and per-layer values", IR_MAX_HPARAMS);
    struct ir_hparam *v = &ir->hp[ir->n_hp];
    memset(v, 0, sizeof *v);
    const char *text = lua_tostring(L, 1);
    char err[160];
    if (ast_parse(text, lookup_condition, ir, &v->def, err, sizeof err))
        luaL_error(L, "g.per_layer: condition \"%s\": %s", text, err);
    if (ast_has(&v->def, "q/"))
        luaL_error(L, "g.per_layer: condition \"%s\": integers only, with + - * %% and a comparison (no / or sqrt)",
                   text);
    int a = choice(L, 2, v, 0), b = choice(L, 3, v, 1);
    if (a >= 0 && b >= 0 && a != b)
        luaL_error(L, "g.per_layer: the two values differ in kind (an integer and an f32)");
    if ((a == HP_INT && b == HP_FLOAT) || (a == HP_FLOAT && b == HP_INT))
        luaL_error(L, "g.per_layer: an integer value cannot have a fractional alternative");
    v->kind = a == HP_FLOAT || b == HP_FLOAT ? HP_FLOAT : HP_INT;
    v->source = HP_LAYER;
    v->line = line_of_caller(L);
    snprintf(v->def_text, sizeof v->def_text, "%s", text);
    for (int k = 0;; k++) { /* a C name no hyperparameter has */
        snprintf(v->name, sizeof v->name, "layer_value%d", k);
        if (ir_find_hparam(ir, v->name) < 0)
            break;
    }
    push_handle(L, HPARAM_MT, ir->n_hp++);
    return 1;
}

/* A table of tensor handles with an __index that refuses unknown names. */
static int weights_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "no %s tensor '%s' is declared", lua_toboolean(L, lua_upvalueindex(1)) ? "layer" : "model",
                      k ? k : "?");
}

static void push_weights(lua_State *L, struct ir *ir, bool per_layer)
{
    lua_newtable(L);
    for (int i = 0; i < ir->n_t; i++) {
        if (ir->t[i].per_layer == per_layer) {
            push_handle(L, WEIGHT_MT, i);
            lua_setfield(L, -2, ir->t[i].field);
        }
    }
    lua_newtable(L);
    lua_pushboolean(L, per_layer);
    lua_pushcclosure(L, weights_index, 1);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

/* g.layers(count, carried..., body): body(L, carried...) runs once, traced;
 * what it returns is what the next layer receives. */
static int g_layers(lua_State *L)
{
    struct ir *ir = describe_ir(L);
    struct trace_state *s = state(L);
    int top = lua_gettop(L);
    if (top < 3)
        luaL_error(L, "g.layers takes a count, the values carried through the layers and a function, got %d "
                      "arguments", top);
    if (ir->traced_loop)
        luaL_error(L, "g.layers may appear only once in forward");
    int count = check_hparam(L, 1, "layers", HP_INT);
    luaL_checktype(L, top, LUA_TFUNCTION);
    int n = top - 2;
    if (n > IR_MAX_CARRIED)
        luaL_error(L, "g.layers carries at most %d values, got %d", IR_MAX_CARRIED, n);
    ir->traced_loop = true;
    ir->n_layer_hp = count;
    ir->n_carried = n;
    for (int i = 0; i < n; i++)
        ir->carried_init[i] = check_node(L, 2 + i, "layers");
    s->region = REGION_BODY;
    s->in_layers = true;
    lua_pushvalue(L, top);
    push_weights(L, ir, true);
    for (int i = 0; i < n; i++) {
        ir->carried_param[i] = record(L, IR_OP_CARRY, 1, &ir->carried_init[i], 0, NULL);
        last_node(L)->carry = i;
    }
    lua_call(L, 1 + n, LUA_MULTRET);
    int got = lua_gettop(L) - top;
    if (got != n)
        luaL_error(L, "the g.layers function must return the %d carried value%s, it returned %d", n, n == 1 ? "" : "s",
                   got);
    for (int i = 0; i < n; i++) {
        int *p = luaL_testudata(L, top + 1 + i, NODE_MT);
        if (!p)
            luaL_error(L, "the g.layers function returned a %s as carried value %d", luaL_typename(L, top + 1 + i),
                       i + 1);
        ir->carried_out[i] = *p;
    }
    s->region = REGION_POST;
    s->in_layers = false;
    return n;
}

static int hparams_index(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "no hyperparameter '%s' is declared", k ? k : "?");
}

static void push_hparams(lua_State *L, struct ir *ir)
{
    lua_newtable(L);
    for (int i = 0; i < ir->n_hp; i++) {
        push_handle(L, HPARAM_MT, i);
        lua_setfield(L, -2, ir->hp[i].name);
    }
    lua_newtable(L);
    lua_pushcfunction(L, hparams_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

static int g_unknown(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    return luaL_error(L, "unknown op g.%s (see docs/adding-an-architecture.md for the vocabulary)", k ? k : "?");
}

static int handle_tostring(lua_State *L)
{
    lua_pushstring(L, "minfer value");
    return 1;
}

static void push_g(lua_State *L)
{
    static const luaL_Reg ops[] = {
        { "tokens", g_tokens },     { "embed", g_embed },         { "rms_norm", g_rms_norm }, { "matmul", g_matmul },
        { "add", g_add },           { "mul", g_mul },             { "add_bias", g_add_bias }, { "silu", g_silu },
        { "heads", g_heads },       { "head_norm", g_head_norm }, { "rope", g_rope },         { "kv_store", g_kv_store },
        { "attention", g_attention }, { "outputs", g_outputs }, { "layers", g_layers }, { "gelu", g_gelu },
        { "scale", g_scale },       { "per_layer", g_per_layer }, { NULL, NULL },
    };
    luaL_newlib(L, ops);
    lua_newtable(L);
    lua_pushcfunction(L, g_unknown);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

static void make_metatables(lua_State *L)
{
    luaL_newmetatable(L, NODE_MT);
    lua_pushcfunction(L, g_add);
    lua_setfield(L, -2, "__add");
    lua_pushcfunction(L, g_mul);
    lua_setfield(L, -2, "__mul");
    lua_pushcfunction(L, handle_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    luaL_newmetatable(L, WEIGHT_MT);
    lua_pop(L, 1);
    luaL_newmetatable(L, HPARAM_MT);
    lua_pop(L, 1);
}

int trace_forward(lua_State *L, struct ir *ir, struct error *e)
{
    struct trace_state *s = lua_newuserdatauv(L, sizeof *s, 0);
    s->region = REGION_PRE;
    s->in_layers = false;
    lua_setfield(L, LUA_REGISTRYINDEX, "minfer.trace");
    make_metatables(L);
    lua_getfield(L, LUA_REGISTRYINDEX, DESCRIBE_FORWARD);
    /* the graph's inputs besides the token ids come first, so they are
     * defined before anything reads them; they take forward's line */
    lua_Debug ar;
    lua_pushvalue(L, -1);
    lua_getinfo(L, ">S", &ar);
    ir->positions = record(L, OP_POSITIONS, 0, NULL, 0, NULL);
    ir->kv_len = record(L, OP_KV_LEN, 0, NULL, 0, NULL);
    ir->node[ir->positions].line = ir->node[ir->kv_len].line = ar.linedefined > 0 ? ar.linedefined : 1;
    lua_pop(L, 2);
    push_g(L);
    push_weights(L, ir, false);
    push_hparams(L, ir);
    if (lua_pcall(L, 3, 1, 0) != LUA_OK)
        return fail(e, "%s", lua_tostring(L, -1));
    int *p = luaL_testudata(L, -1, NODE_MT);
    if (!p)
        return fail(e, "%s: forward must return the logits (a g.* value), it returned %s", ir->file,
                    luaL_typename(L, -1));
    if (!ir->traced_loop)
        return fail(e, "%s: forward never calls g.layers; the per-layer part must be inside it", ir->file);
    ir->result = *p;
    return 0;
}
