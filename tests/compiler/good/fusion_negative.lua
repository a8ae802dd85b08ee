-- Patterns that look fusable but are not: every fusion rule must leave
-- these alone (see tests/test_compiler.c).
return arch {
  gguf_name = "negative",
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
    norm = tensor("blk.%d.norm.weight", { "n_embd" }),
    a    = tensor("blk.%d.a.weight", { "n_embd", "n_embd" }),
    b    = tensor("blk.%d.b.weight", { "n_embd", "n_embd" }),
  },
  forward = function(g, w, hp)
    local x = g.embed(w.tok_embd, g.tokens())
    x = g.layers(hp.n_layer, x, function(L, x)
      local h = g.rms_norm(x, L.norm, hp.eps)   -- read by a non-matmul too: stays f32
      local p = g.matmul(L.a, h)                -- two matmuls of h, not three: no QKV
      local q = g.matmul(L.b, h)
      local s = g.silu(p)                       -- silu used twice: no SWIGLU
      local y = s * q + s
      local r = g.matmul(L.a, y)                -- read twice: no residual epilogue
      return r + h + r
    end)
    return g.matmul(w.output, x)
  end,
}
