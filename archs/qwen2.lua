-- archs/qwen2.lua: Qwen2 and Qwen2.5. Biases on the Q, K and V projections,
-- NeoX RoPE, SwiGLU FFN; the small models tie output.weight to the token
-- embedding (Qwen2.5-0.5B: n_embd 896, 14 heads, 2 KV heads, 24 layers).
return arch {
  gguf_name = "qwen2",
  hparams = {
    n_embd    = gguf "{arch}.embedding_length",
    n_layer   = gguf "{arch}.block_count",
    n_head    = gguf "{arch}.attention.head_count",
    n_head_kv = gguf("{arch}.attention.head_count_kv", { default = "n_head" }),
    head_dim  = derived "n_embd / n_head",
    n_ff      = gguf "{arch}.feed_forward_length",
    n_ctx     = gguf "{arch}.context_length",
    n_vocab   = array_length "tokenizer.ggml.tokens",
    eps       = gguf("{arch}.attention.layer_norm_rms_epsilon", { type = "f32" }),
    rope_base = gguf("{arch}.rope.freq_base", { type = "f32", default = 1000000 }),
  },
  tensors = {
    tok_embd    = tensor("token_embd.weight", { "n_embd", "n_vocab" }),
    output_norm = tensor("output_norm.weight", { "n_embd" }),
    output      = tensor("output.weight", { "n_embd", "n_vocab" }, { fallback = "tok_embd" }),
  },
  layer = {
    attn_norm   = tensor("blk.%d.attn_norm.weight", { "n_embd" }),
    attn_q      = tensor("blk.%d.attn_q.weight", { "n_embd", "n_head * head_dim" }),
    attn_q_b    = tensor("blk.%d.attn_q.bias", { "n_head * head_dim" }, { optional = true }),
    attn_k      = tensor("blk.%d.attn_k.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_k_b    = tensor("blk.%d.attn_k.bias", { "n_head_kv * head_dim" }, { optional = true }),
    attn_v      = tensor("blk.%d.attn_v.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_v_b    = tensor("blk.%d.attn_v.bias", { "n_head_kv * head_dim" }, { optional = true }),
    attn_output = tensor("blk.%d.attn_output.weight", { "n_head * head_dim", "n_embd" }),
    ffn_norm    = tensor("blk.%d.ffn_norm.weight", { "n_embd" }),
    ffn_gate    = tensor("blk.%d.ffn_gate.weight", { "n_embd", "n_ff" }),
    ffn_up      = tensor("blk.%d.ffn_up.weight", { "n_embd", "n_ff" }),
    ffn_down    = tensor("blk.%d.ffn_down.weight", { "n_ff", "n_embd" }),
  },
  forward = function(g, w, hp)
    local x = g.embed(w.tok_embd, g.tokens())
    x = g.layers(hp.n_layer, x, function(L, x)
      local h = g.rms_norm(x, L.attn_norm, hp.eps)
      local q = g.add_bias(g.matmul(L.attn_q, h), L.attn_q_b)
      local k = g.add_bias(g.matmul(L.attn_k, h), L.attn_k_b)
      local v = g.add_bias(g.matmul(L.attn_v, h), L.attn_v_b)
      q = g.rope(g.heads(q, hp.head_dim), hp.rope_base)
      k = g.rope(g.heads(k, hp.head_dim), hp.rope_base)
      local kv = g.kv_store(k, g.heads(v, hp.head_dim))
      x = x + g.matmul(L.attn_output, g.attention(q, kv))
      h = g.rms_norm(x, L.ffn_norm, hp.eps)
      local gate, up = g.matmul(L.ffn_gate, h), g.matmul(L.ffn_up, h)
      return x + g.matmul(L.ffn_down, g.silu(gate) * up)
    end)
    x = g.rms_norm(g.outputs(x), w.output_norm, hp.eps)
    return g.matmul(w.output, x)
  end,
}
