-- archs/gemma3.lua: Gemma 3 (the text model). Apart from the Qwen/Llama
-- family: the embedding is scaled by sqrt(n_embd); every block is wrapped in
-- RMS norms on both sides (the one after is applied to the block's output
-- before the residual add); the feed-forward block is GELU-gated; and most
-- layers attend over a sliding window with their own RoPE base, while every
-- swa_period-th layer attends to the whole context with the file's base
-- (and its linear RoPE scaling: 4B and larger divide positions by 8 there).
-- GGUF files hold Gemma's norm weights as (1 + w), so the norms are plain
-- RMS norms here. The output is tied to the embedding.
return arch {
  gguf_name = "gemma3",
  hparams = {
    n_embd         = gguf "{arch}.embedding_length",
    n_layer        = gguf "{arch}.block_count",
    n_head         = gguf "{arch}.attention.head_count",
    n_head_kv      = gguf("{arch}.attention.head_count_kv", { default = "n_head" }),
    head_dim       = gguf("{arch}.attention.key_length", { default = "n_embd / n_head" }),
    n_ff           = gguf "{arch}.feed_forward_length",
    n_ctx          = gguf "{arch}.context_length",
    n_vocab        = array_length "tokenizer.ggml.tokens",
    eps            = gguf("{arch}.attention.layer_norm_rms_epsilon", { type = "f32" }),
    rope_base      = gguf("{arch}.rope.freq_base", { type = "f32", default = 1000000 }),
    sliding_window = gguf "{arch}.attention.sliding_window",
    rope_factor    = gguf("{arch}.rope.scaling.factor", { type = "f32", default = 1 }),
    -- Gemma 3's files carry neither; these are its values (as llama.cpp's)
    rope_base_swa  = gguf("{arch}.rope.freq_base_swa", { type = "f32", default = 10000 }),
    swa_period     = gguf("{arch}.attention.sliding_window_pattern", { default = "6" }),
    embd_scale     = derived("sqrt(n_embd)", { type = "f32" }),
  },
  tensors = {
    tok_embd    = tensor("token_embd.weight", { "n_embd", "n_vocab" }),
    output_norm = tensor("output_norm.weight", { "n_embd" }),
    output      = tensor("output.weight", { "n_embd", "n_vocab" }, { fallback = "tok_embd" }),
  },
  layer = {
    attn_norm      = tensor("blk.%d.attn_norm.weight", { "n_embd" }),
    attn_q         = tensor("blk.%d.attn_q.weight", { "n_embd", "n_head * head_dim" }),
    attn_k         = tensor("blk.%d.attn_k.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_v         = tensor("blk.%d.attn_v.weight", { "n_embd", "n_head_kv * head_dim" }),
    attn_q_norm    = tensor("blk.%d.attn_q_norm.weight", { "head_dim" }),
    attn_k_norm    = tensor("blk.%d.attn_k_norm.weight", { "head_dim" }),
    attn_output    = tensor("blk.%d.attn_output.weight", { "n_head * head_dim", "n_embd" }),
    attn_post_norm = tensor("blk.%d.post_attention_norm.weight", { "n_embd" }),
    ffn_norm       = tensor("blk.%d.ffn_norm.weight", { "n_embd" }),
    ffn_gate       = tensor("blk.%d.ffn_gate.weight", { "n_embd", "n_ff" }),
    ffn_up         = tensor("blk.%d.ffn_up.weight", { "n_embd", "n_ff" }),
    ffn_down       = tensor("blk.%d.ffn_down.weight", { "n_ff", "n_embd" }),
    ffn_post_norm  = tensor("blk.%d.post_ffw_norm.weight", { "n_embd" }),
  },
  forward = function(g, w, hp)
    local x = g.scale(g.embed(w.tok_embd, g.tokens()), hp.embd_scale)
    x = g.layers(hp.n_layer, x, function(L, x)
      -- the global layers: the whole context, the file's RoPE base and scaling
      local global = "(layer + 1) % swa_period == 0"
      local window = g.per_layer(global, 0, hp.sliding_window)
      local base = g.per_layer(global, hp.rope_base, hp.rope_base_swa)
      local factor = g.per_layer(global, hp.rope_factor, 1.0)
      local h = g.rms_norm(x, L.attn_norm, hp.eps)
      local q = g.heads(g.matmul(L.attn_q, h), hp.head_dim)
      local k = g.heads(g.matmul(L.attn_k, h), hp.head_dim)
      local v = g.heads(g.matmul(L.attn_v, h), hp.head_dim)
      q = g.rope(g.head_norm(q, L.attn_q_norm, hp.eps), base, "neox", factor)
      k = g.rope(g.head_norm(k, L.attn_k_norm, hp.eps), base, "neox", factor)
      local attn = g.matmul(L.attn_output, g.attention(q, g.kv_store(k, v), window))
      x = x + g.rms_norm(attn, L.attn_post_norm, hp.eps)
      h = g.rms_norm(x, L.ffn_norm, hp.eps)
      local ff = g.matmul(L.ffn_down, g.gelu(g.matmul(L.ffn_gate, h)) * g.matmul(L.ffn_up, h))
      return x + g.rms_norm(ff, L.ffn_post_norm, hp.eps)
    end)
    x = g.rms_norm(g.outputs(x), w.output_norm, hp.eps)
    return g.matmul(w.output, x)
  end,
}
