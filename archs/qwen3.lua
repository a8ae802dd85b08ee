-- archs/qwen3.lua: Qwen3 (dense). Like Qwen2 without the Q/K/V biases, with
-- an RMS norm on every query and key head before RoPE, and head_dim given
-- explicitly (Qwen3-8B: 32 heads of 128 over n_embd 4096).
return arch {
  gguf_name = "qwen3",
  hparams = {
    n_embd    = gguf "{arch}.embedding_length",
    n_layer   = gguf "{arch}.block_count",
    n_head    = gguf "{arch}.attention.head_count",
    n_head_kv = gguf("{arch}.attention.head_count_kv", { default = "n_head" }),
    head_dim  = gguf("{arch}.attention.key_length", { default = "n_embd / n_head" }),
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
    attn_k      = tensor("blk.%d.attn_k.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_v      = tensor("blk.%d.attn_v.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_q_norm = tensor("blk.%d.attn_q_norm.weight", { "head_dim" }),
    attn_k_norm = tensor("blk.%d.attn_k_norm.weight", { "head_dim" }),
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
      local q = g.heads(g.matmul(L.attn_q, h), hp.head_dim)
      local k = g.heads(g.matmul(L.attn_k, h), hp.head_dim)
      local v = g.heads(g.matmul(L.attn_v, h), hp.head_dim)
      q = g.rope(g.head_norm(q, L.attn_q_norm, hp.eps), hp.rope_base)
      k = g.rope(g.head_norm(k, L.attn_k_norm, hp.eps), hp.rope_base)
      local kv = g.kv_store(k, v)
      x = x + g.matmul(L.attn_output, g.attention(q, kv))
      h = g.rms_norm(x, L.ffn_norm, hp.eps)
      local gate, up = g.matmul(L.ffn_gate, h), g.matmul(L.ffn_up, h)
      return x + g.matmul(L.ffn_down, g.silu(gate) * up)
    end)
    x = g.rms_norm(g.outputs(x), w.output_norm, hp.eps)
    return g.matmul(w.output, x)
  end,
}
