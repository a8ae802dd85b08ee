-- expect: tests/compiler/bad/pattern_without_layer.lua:15: layer tensor 'ffn_norm': name pattern "blk.ffn_norm.weight" needs exactly one %d for the layer number
return arch {
  gguf_name = "tiny",
  hparams = { n_ctx = gguf "{arch}.context_length",
    n_embd  = gguf "{arch}.embedding_length",
    n_layer = gguf "{arch}.block_count",
    n_vocab = array_length "tokenizer.ggml.tokens",
    eps     = gguf("{arch}.attention.layer_norm_rms_epsilon", { type = "f32" }),
  },
  tensors = {
    tok_embd = tensor("token_embd.weight", { "n_embd", "n_vocab" }),
    output   = tensor("output.weight", { "n_embd", "n_vocab" }),
  },
  layer = {
    ffn_norm = tensor("blk.ffn_norm.weight", { "n_embd" }),
    ffn_up   = tensor("blk.%d.ffn_up.weight", { "n_embd", "n_embd" }),
    ffn_b    = tensor("blk.%d.ffn_up.bias", { "n_embd" }, { optional = true }),
    ffn_wide = tensor("blk.%d.ffn_wide.weight", { "n_embd", "2 * n_embd" }),
  },
  forward = function(g, w, hp)
    local x = g.embed(w.tok_embd, g.tokens())
    x = g.layers(hp.n_layer, x, function(L, x)
      local h = g.rms_norm(x, L.ffn_norm, hp.eps)
      return x + g.matmul(L.ffn_up, h)
    end)
    return g.matmul(w.output, x)
  end,
}
