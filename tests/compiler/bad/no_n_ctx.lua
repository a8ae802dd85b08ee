-- expect: tests/compiler/bad/no_n_ctx.lua:2: arch.hparams must declare n_ctx, the model's training context (an integer hyperparameter, e.g. n_ctx = gguf "{arch}.context_length")
return arch {
  gguf_name = "tiny",
  hparams = {
    n_embd  = gguf "{arch}.embedding_length",
    n_layer = gguf "{arch}.block_count",
    n_vocab = array_length "tokenizer.ggml.tokens",
  },
  tensors = {
    tok_embd = tensor("token_embd.weight", { "n_embd", "n_vocab" }),
  },
  layer = {},
  forward = function(g, w, hp)
    local x = g.embed(w.tok_embd, g.tokens())
    x = g.layers(hp.n_layer, x, function(L, x) return x + x end)
    return g.matmul(w.tok_embd, x)
  end,
}
