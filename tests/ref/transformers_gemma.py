"""Records Hugging Face transformers' answers for the real Gemma 3 270M, a
second reference beside llama.cpp's (tests/test_real_model.c): its logits,
teacher-forced over the same four texts and tokens as the llama.cpp fixture,
from the GGUF's own weights (dequantized with the gguf package), in float32
with eager attention. Run once by hand on the GPU machine (torch,
transformers), not in CI:

    python3 tests/ref/transformers_gemma.py models/gemma-3-270m-q4_k_m.gguf \\
        tests/fixtures/data/gemma-3-270m.llama.txt tests/fixtures/data/gemma-3-270m.transformers.txt

The output has the llama.cpp fixture's format (tests/ref/llama_reference.py):
a model line, then for each text its prompt record, its tokens and, per
position, the log-sum-exp of the logits and the best 20 (id, logit); no
greedy or perplexity records.
"""
import os
import sys

import numpy as np
import gguf

TOP = 20

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import make_fixtures  # noqa: E402  (its name tables: Hugging Face -> GGUF, and Gemma's own)

# GGUF names (llama.cpp's converter) -> Hugging Face's, per layer
LAYER_NAMES = {v: k for k, v in make_fixtures.GGUF_NAMES.items() if not k.startswith("model.") and k != "lm_head.weight"}
LAYER_NAMES.update({v: k for k, v in make_fixtures.GEMMA_NAMES.items()})


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    _, i, rest = name.split(".", 2)
    return f"model.layers.{i}.{LAYER_NAMES[rest]}"


def model_from_gguf(path):
    import torch
    import transformers
    r = gguf.GGUFReader(path)
    a = "gemma3"
    assert field(r, "general.architecture") == a
    n_layer = int(field(r, f"{a}.block_count"))
    head_dim = int(field(r, f"{a}.attention.key_length"))
    period = int(field(r, f"{a}.attention.sliding_window_pattern", 6))
    types = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n_layer)]
    assert field(r, f"{a}.rope.scaling.factor") is None, "this script takes unscaled RoPE only"
    cfg = transformers.Gemma3TextConfig(
        vocab_size=len(field(r, "tokenizer.ggml.tokens")), hidden_size=int(field(r, f"{a}.embedding_length")),
        intermediate_size=int(field(r, f"{a}.feed_forward_length")), num_hidden_layers=n_layer,
        num_attention_heads=int(field(r, f"{a}.attention.head_count")),
        num_key_value_heads=int(field(r, f"{a}.attention.head_count_kv")), head_dim=head_dim,
        query_pre_attn_scalar=head_dim, max_position_embeddings=int(field(r, f"{a}.context_length")),
        rms_norm_eps=float(field(r, f"{a}.attention.layer_norm_rms_epsilon")),
        sliding_window=int(field(r, f"{a}.attention.sliding_window")), layer_types=types,
        hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None, attn_logit_softcapping=None,
        tie_word_embeddings=True, attn_implementation="eager",
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": float(field(r, f"{a}.rope.freq_base"))},
                         "sliding_attention": {"rope_type": "default",
                                               "rope_theta": float(field(r, f"{a}.rope.freq_base_swa", 10000.0))}})
    model = transformers.Gemma3ForCausalLM(cfg)
    sd = {}
    for t in r.tensors:
        x = gguf.quants.dequantize(np.ascontiguousarray(t.data), gguf.GGMLQuantizationType(t.tensor_type))
        x = np.asarray(x, dtype=np.float32).reshape([int(s) for s in reversed(t.shape)])
        if t.name.endswith("norm.weight"):  # GGUF holds Gemma's (1 + w)
            x = x - 1
        sd[hf_name(t.name)] = torch.from_numpy(np.ascontiguousarray(x))
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    return model.float().eval(), cfg


def read_prompts(path):
    """The llama.cpp fixture's prompt records: (name, text bytes, ids)."""
    out = []
    with open(path, "rb") as f:
        for line in iter(f.readline, b""):
            if line.startswith(b"prompt "):
                _, name, n_bytes, n = line.split()
                text = f.read(int(n_bytes))
                assert f.read(1) == b"\n"
                ids = [int(v) for v in f.readline().split()]
                assert len(ids) == int(n)
                out.append((name.decode(), text, ids))
    return out


def main():
    import torch
    import transformers
    torch.set_grad_enabled(False)
    model_path, llama_fixture, out_path = sys.argv[1:4]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, cfg = model_from_gguf(model_path)
    model = model.to(device)
    with open(out_path, "w") as out:
        out.write(f"model {os.path.basename(model_path)} {os.path.getsize(model_path)} transformers-{transformers.__version__} "
                  f"kv f32\n")
        for name, text, ids in read_prompts(llama_fixture):
            logits = model(torch.tensor([ids], device=device)).logits[0].double().cpu().numpy()
            out.write(f"prompt {name} {len(text)} {len(ids)}\n")
            out.write(text.decode() + "\n")
            out.write(" ".join(map(str, ids)) + "\n")
            for p in range(len(ids)):
                row = logits[p]
                m = row.max()
                lse = m + np.log(np.exp(row - m).sum())
                top = np.argsort(-row, kind="stable")[:TOP]
                out.write(f"{lse:.6f} " + " ".join(f"{i} {row[i]:.6f}" for i in top) + "\n")
            print(name, "done", flush=True)


if __name__ == "__main__":
    main()
