"""spm_vocab.py: a Llama 2-style SentencePiece vocabulary from Gemma 3's: the
same tokens, scores and types in a vocabulary-only GGUF (architecture
"llama", no tensors) whose add_space_prefix is true, so the space-prefix
rule is checked against llama.cpp on a real vocabulary
(tests/test_real_gemma.c; tests/ref/spm_tokens.py records the ids).

usage: spm_vocab.py GEMMA.gguf OUT.gguf"""
import sys

import gguf


def main():
    src, dst = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(src)

    def values(name):
        f = r.fields[name]
        return [f.parts[i] for i in f.data]

    tokens = [bytes(p) for p in values("tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in values("tokenizer.ggml.scores")]
    types = [int(p[0]) for p in values("tokenizer.ggml.token_type")]
    w = gguf.GGUFWriter(dst, "llama")
    # the hyperparameters llama.cpp reads even for a vocabulary-only load
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(64)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
