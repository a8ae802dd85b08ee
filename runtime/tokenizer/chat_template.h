/* chat_template.h: the chat formats minfer speaks. A GGUF file carries its
 * format as a Jinja template (tokenizer.chat_template), which minfer does
 * not run: it recognizes the template by its markers (ChatML as Qwen uses
 * it, Llama 3's headers) and reads the default system message a template
 * writes when the conversation has none. Any other template is an error
 * naming it, unless a format is forced. */
#ifndef MINFER_CHAT_TEMPLATE_H
#define MINFER_CHAT_TEMPLATE_H

#include <stdbool.h>

#include "error.h"
#include "gguf/gguf.h"

enum chat_format { CHAT_CHATML, CHAT_LLAMA3, CHAT_GEMMA };

struct chat_template {
    enum chat_format format;
    char default_system[1024]; /* the template's system message when none is given; "" for none */
};

/* Chooses the format from g's template, or the one named by forced
 * ("chatml", "llama3") when it is not NULL. */
int chat_template_detect(const struct gguf *g, const char *forced, struct chat_template *t, struct error *e);

/* The text of a whole message of role ("system", "user", "assistant"; the
 * format's own name for the assistant is written, Gemma's "model"), into
 * buf (size n); -1 when it does not fit. */
int chat_message(const struct chat_template *t, const char *role, const char *content, char *buf, size_t n);

/* The text that opens the assistant's reply, into buf (size n; -1 when it
 * does not fit); the model ends the reply with chat_end_of_turn(), after
 * which the context gets chat_after_turn(). */
int chat_reply_prefix(const struct chat_template *t, char *buf, size_t n);
const char *chat_end_of_turn(const struct chat_template *t);
const char *chat_after_turn(const struct chat_template *t);

const char *chat_format_name(enum chat_format f);

/* Whether a system message is a turn of its own; if not (Gemma), callers
 * write it at the start of the first user message, then a blank line, as
 * the format's template does. */
bool chat_system_turn(const struct chat_template *t);

#endif
