-- expect: tests/compiler/bad/per_layer_kinds.lua:21: g.per_layer: the two values differ in kind (an integer and an f32)
return arch {
  gguf_name = "tiny",
  hparams = { n_ctx = gguf "{arch}.context_length",
    n_embd  = gguf "{arch}.embedding_length",
    n_layer = gguf "{arch}.block_count",
    n_vocab = array_length "tokenizer.ggml.tokens",
    eps     = gguf("{arch}.attention.layer_norm_rms_epsilon", { type = "f32" }),
    window  = gguf("{arch}.attention.sliding_window", { default = "4" }),
  },
  tensors = {
    tok_embd = tensor("token_embd.weight", { "n_embd", "n_vocab" }),
    output   = tensor("output.weight", { "n_embd", "n_vocab" }),
  },
  layer = {
    ffn_norm = tensor("blk.%d.ffn_norm.weight", { "n_embd" }),
  },
  forward = function(g, w, hp)
    local x = g.embed(w.tok_embd, g.tokens())
    x = g.layers(hp.n_layer, x, function(L, x)
      local e = g.per_layer("layer % 6 == 5", hp.eps, hp.window)
      return x + g.rms_norm(x, L.ffn_norm, e)
    end)
    return g.matmul(w.output, x)
  end,
}
