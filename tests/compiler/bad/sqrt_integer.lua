-- expect: tests/compiler/bad/sqrt_integer.lua:10: hparam 'half': sqrt(...) makes an f32 value: declare it with { type = "f32" }
return arch {
  gguf_name = "tiny",
  hparams = { n_ctx = gguf "{arch}.context_length",
    n_embd  = gguf "{arch}.embedding_length",
    n_layer = gguf "{arch}.block_count",
    n_vocab = array_length "tokenizer.ggml.tokens",
    eps     = gguf("{arch}.attention.layer_norm_rms_epsilon", { type = "f32" }),
    window  = gguf("{arch}.attention.sliding_window", { default = "4" }),
    half    = derived "sqrt(n_embd)",
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
      return x + g.rms_norm(x, L.ffn_norm, hp.eps)
    end)
    return g.matmul(w.output, x)
  end,
}
