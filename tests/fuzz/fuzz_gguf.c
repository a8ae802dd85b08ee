/* fuzz_gguf.c: libFuzzer entry for the GGUF reader and the tokenizer built
 * from its metadata. Whatever the bytes, the parser must either refuse them
 * with an error or hand back a struct whose every pointer stays inside the
 * input; the walk below touches all of it so ASan sees any pointer that does
 * not. A file that parses is then offered to the tokenizer, which must load
 * it or refuse it, and encode and decode text without faults. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

static void walk(const struct gguf_value *v, int depth)
{
    if (v->type == GGUF_STRING && v->s.n)
        sink ^= (uint8_t)(v->s.p[0] ^ v->s.p[v->s.n - 1]);
    if (v->type != GGUF_ARRAY || depth > GGUF_MAX_ARRAY_DEPTH)
        return;
    struct gguf_arr_iter it;
    struct gguf_value elem;
    gguf_arr_begin(&it, &v->a);
    while (gguf_arr_next(&it, &elem))
        walk(&elem, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gguf g;
    struct error e;
    if (gguf_parse(&g, data, size, &e) != 0)
        return 0;
    for (uint64_t i = 0; i < g.n_kv; i++) {
        char key[128];
        size_t n = g.kv[i].key.n < sizeof key - 1 ? g.kv[i].key.n : sizeof key - 1;
        memcpy(key, g.kv[i].key.p, n);
        key[n] = 0;
        (void)gguf_find(&g, key);
        walk(&g.kv[i].value, 0);
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const struct gguf_tensor *t = &g.tensors[i];
        char name[GGUF_MAX_TENSOR_NAME + 1];
        memcpy(name, t->name.p, t->name.n);
        name[t->name.n] = 0;
        if (gguf_find_tensor(&g, name) != t)
            __builtin_trap();
        if (t->nbytes)
            sink ^= (uint8_t)(t->data[0] ^ t->data[t->nbytes - 1]);
    }
    struct tokenizer tok;
    if (tokenizer_load(&tok, &g, &e) == 0) {
        static const char text[] = "Hello, world! 你好 <|im_start|>x  12 \n";
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        if (tokenizer_encode(&tok, text, sizeof text - 1, true, &ids, &n, &cap, &e) == 0) {
            char out[64];
            struct detokenizer d = { .n_pending = 0 };
            for (size_t i = 0; i < n; i++)
                detokenize_push(&d, &tok, ids[i], out, sizeof out);
        }
        free(ids);
        tokenizer_free(&tok);
    }
    gguf_free(&g);
    return 0;
}
