/* server.h: `minfer serve`: an OpenAI-compatible HTTP server over one
 * model (docs/server.md lists the endpoints and fields). */
#ifndef MINFER_SERVER_H
#define MINFER_SERVER_H

#include "cli/session.h"

#define SERVER_MAX_BODY ((size_t)1 << 20) /* bytes of a request body; more is a 413 */

/* Loads the model, starts --parallel engines and listens until SIGINT or
 * SIGTERM; then stops, frees everything and returns 0. */
int server_run(const struct session_options *o, struct error *e);

#endif
