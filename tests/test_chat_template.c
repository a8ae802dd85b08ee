/* test_chat_template.c: recognizing a file's chat format and its default
 * system message from tokenizer.chat_template, and the text of messages. */
#include <criterion/criterion.h>
#include <string.h>

#include "tokenizer/chat_template.h"
#include "gguf/gguf_write.h"
#include "support.h"

/* A GGUF file holding only this template (or none, for NULL), opened. */
static void open_with_template(const char *tmpl, struct gguf *g)
{
    struct gguf_writer *w = gguf_writer_new();
    struct error e;
    cr_assert_not_null(w);
    if (tmpl)
        cr_assert_eq(gguf_set_str(w, "tokenizer.chat_template", tmpl), 0);
    const char *path = temp_path(".gguf");
    cr_assert_eq(gguf_write_file(w, path, &e), 0, "%s", e.msg);
    gguf_writer_free(w);
    cr_assert_eq(gguf_open(g, path, &e), 0, "%s", e.msg);
}

/* Qwen2.5's template, as its GGUF files carry it (the tool branch cut). */
static const char qwen25[] =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}";
static const char qwen3[] = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
                            "'<|im_end|>' + '\\n' }}{%- endfor %}";
static const char llama3[] = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                             "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
                             "trim + '<|eot_id|>' %}{{ content }}{% endfor %}";
static const char gemma[] = "{{ bos_token }}{% for message in messages %}<start_of_turn>{{ message['role'] }}\n"
                            "{{ message['content'] }}<end_of_turn>\n{% endfor %}";
static const char vicuna[] = "{{ bos_token }}{% for message in messages %}{{ message['role'] | upper }}: "
                             "{{ message['content'] }}\n{% endfor %}ASSISTANT:";

Test(chat_template, qwen_is_chatml_with_its_default_system_message)
{
    struct gguf g;
    struct chat_template t;
    struct error e;
    open_with_template(qwen25, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.format, CHAT_CHATML);
    cr_assert_str_eq(t.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
    gguf_free(&g);
    open_with_template(qwen3, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.format, CHAT_CHATML);
    cr_assert_str_eq(t.default_system, "", "a template that writes no system message has none");
    gguf_free(&g);
}

Test(chat_template, llama3_headers_are_recognized)
{
    struct gguf g;
    struct chat_template t;
    struct error e;
    open_with_template(llama3, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.format, CHAT_LLAMA3);
    char buf[256];
    cr_assert_eq(chat_message(&t, "user", "Hi!", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
    cr_assert_eq(chat_reply_prefix(&t, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    cr_assert_eq(chat_reply_prefix(&t, buf, 10), -1, "a prefix that does not fit");
    cr_assert_str_eq(chat_end_of_turn(&t), "<|eot_id|>");
    gguf_free(&g);
}

/* Gemma's turns: the assistant is "model", and a system message has no
 * turn of its own (callers put it at the start of the first user turn). */
Test(chat_template, gemma_turns_are_recognized)
{
    struct gguf g;
    struct chat_template t;
    struct error e;
    open_with_template(gemma, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.format, CHAT_GEMMA);
    cr_assert(!chat_system_turn(&t));
    char buf[256];
    cr_assert_eq(chat_message(&t, "user", "Hi!", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<start_of_turn>user\nHi!<end_of_turn>\n");
    cr_assert_eq(chat_message(&t, "assistant", "Hello.", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<start_of_turn>model\nHello.<end_of_turn>\n");
    cr_assert_eq(chat_reply_prefix(&t, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<start_of_turn>model\n");
    cr_assert_str_eq(chat_end_of_turn(&t), "<end_of_turn>");
    cr_assert_str_eq(t.default_system, "");
    gguf_free(&g);
}

Test(chat_template, unknown_or_missing_templates_are_errors_unless_forced)
{
    struct gguf g;
    struct chat_template t;
    struct error e;
    open_with_template(vicuna, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), -1);
    cr_assert_str_eq(e.msg, "the file's chat template is not ChatML, Llama 3's or Gemma's (it begins '{{ bos_token }}{% "
                            "for message in message'; --chat-template chatml|llama3|gemma forces one)");
    cr_assert_eq(chat_template_detect(&g, "chatml", &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t.format, CHAT_CHATML);
    char buf[256];
    cr_assert_eq(chat_message(&t, "system", "Be brief.", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "<|im_start|>system\nBe brief.<|im_end|>\n");
    cr_assert_eq(chat_message(&t, "system", "Be brief.", buf, 10), -1, "a message that does not fit is refused");
    cr_assert_eq(chat_template_detect(&g, "vicuna", &t, &e), -1);
    cr_assert_str_eq(e.msg, "unknown chat format 'vicuna' (minfer has chatml, llama3 and gemma)");
    gguf_free(&g);
    open_with_template(NULL, &g);
    cr_assert_eq(chat_template_detect(&g, NULL, &t, &e), -1);
    cr_assert_str_eq(e.msg, "the file has no tokenizer.chat_template (--chat-template chatml|llama3|gemma chooses one)");
    gguf_free(&g);
}
