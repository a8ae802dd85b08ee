/* describe.h: running an architecture description. The file is executed in
 * a sandboxed Lua 5.4 (base, string, table, math and utf8 only; no load,
 * dofile, require, io, os or debug; bounded memory and instruction count)
 * with the description vocabulary (arch, gguf, derived, array_length,
 * tensor) as its only other globals. Its hyperparameter and tensor tables
 * fill the IR; its forward function is kept for the tracer. */
#ifndef MINFER_COMPILER_DESCRIBE_H
#define MINFER_COMPILER_DESCRIBE_H

#include <lua.h>

#include "error.h"
#include "ir.h"

/* Loads path into ir and leaves *out a Lua state whose registry holds the
 * forward function (see trace.h). Errors read "FILE:LINE: message". */
int describe_load(struct ir *ir, const char *path, lua_State **out, struct error *e);

/* Registry key of the description's forward function. */
#define DESCRIBE_FORWARD "minfer.forward"

/* The IR a running description fills (kept in the state's extra space). */
struct ir *describe_ir(lua_State *L);

#endif
