/* trace.h: runs the description's forward once with symbolic values and
 * records each op it calls as an IR node. The layer loop body is traced
 * once and becomes a C loop. Errors name the description's file and line. */
#ifndef MINFER_COMPILER_TRACE_H
#define MINFER_COMPILER_TRACE_H

#include <lua.h>

#include "error.h"
#include "ir.h"

int trace_forward(lua_State *L, struct ir *ir, struct error *e);

#endif
