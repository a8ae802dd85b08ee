"""Writes the fuzz seed corpus with the Python gguf package's own writer, so the
seeds are valid files that minfer's writer did not produce.
usage: python3 tests/fuzz/make_corpus.py tests/fuzz/corpus"""
import os
import sys

import numpy as np
import gguf


def write(path, build):
    w = gguf.GGUFWriter(path, arch="seedarch")  # not compiled into minfer: info only reads it
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def small_model(w):
    w.add_block_count(1)
    w.add_embedding_length(32)
    w.add_head_count(2)
    w.add_float32("seedarch.rope.freq_base", 10000.0)
    w.add_bool("general.test_bool", True)
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "<|im_end|>"])
    w.add_array("general.nested", [[1, 2], [3]])
    w.add_tensor("token_embd.weight", np.arange(32 * 4, dtype=np.float32).reshape(4, 32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float16))
    q = gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("blk.0.attn_q.weight", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)


def metadata_only(w):
    for t, v in [("u8", gguf.GGUFValueType.UINT8), ("i16", gguf.GGUFValueType.INT16),
                 ("u64", gguf.GGUFValueType.UINT64), ("f64", gguf.GGUFValueType.FLOAT64)]:
        w.add_key_value("test." + t, 7, v)
    w.add_string("general.name", "seed")


def byte_alphabet():
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the others from U+0100 on."""
    out, extra = [], 0
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return out


def tokenizer(w):
    """A tiny byte-level BPE vocabulary, so the fuzzer reaches the tokenizer."""
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(byte_alphabet() + ["He", "ll", "Hell", "<|im_start|>"])
    w.add_token_types([1] * 259 + [3])
    w.add_token_merges(["H e", "l l", "He ll"])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "small_model.gguf"), small_model)
    write(os.path.join(out, "metadata_only.gguf"), metadata_only)
    write(os.path.join(out, "tokenizer.gguf"), tokenizer)


if __name__ == "__main__":
    main()
