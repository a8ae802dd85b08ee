"""The reference for minfer's tokenizer: Qwen's real vocabulary, run through
Hugging Face `tokenizers`.

The vocabulary is Qwen's own `qwen.tiktoken` (151,643 byte sequences with
their BPE ranks), shipped by the `dashscope` package. From it this script
derives the byte-level vocabulary and the merge list (each token's merge is
the pair its bytes reduce to under the ranks below its own), adds Qwen's
special tokens, and builds a tokenizers.Tokenizer with Qwen2's pipeline (NFC,
the Qwen2 split expression, byte-level BPE). It writes

  OUTDIR/qwen_vocab.gguf   the same vocabulary as GGUF tokenizer metadata
  OUTDIR/cases.txt         one case a line: the text as hex, a tab, the ids
  OUTDIR/llama3_split.gguf, llama3_cases.txt
                           the same vocabulary with Llama 3's split expression
                           (digits in threes), to check that variant too

usage: qwen_tokenizer.py OUTDIR"""
import base64
import importlib.util
import os
import sys
import unicodedata

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
           r"|\s+(?!\S)|\s+")
LLAMA3_PATTERN = PATTERN.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]


def byte_alphabet():
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def load_ranks():
    spec = importlib.util.find_spec("dashscope")
    if spec is None:
        sys.exit("the dashscope package (which ships qwen.tiktoken) is not installed: pip install --no-deps dashscope")
    path = os.path.join(spec.submodule_search_locations[0], "resources", "qwen.tiktoken")
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merge_of(ranks, token, limit):
    """The two parts `token`'s bytes end in when merged by rank, using only
    ranks below `limit` (the token's own)."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best, at = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < limit and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts


def vocabulary():
    ranks = load_ranks()
    alpha = byte_alphabet()
    spell = lambda b: "".join(alpha[x] for x in b)  # noqa: E731
    by_id = sorted(ranks.items(), key=lambda kv: kv[1])
    assert [r for _, r in by_id] == list(range(len(by_id))), "ranks are the ids"
    tokens = [spell(b) for b, _ in by_id]
    merges = []
    for b, r in by_id:
        if len(b) > 1:
            parts = merge_of(ranks, b, r)
            assert len(parts) == 2, (b, parts)
            merges.append((spell(parts[0]), spell(parts[1])))
    return tokens, merges


def hf_tokenizer(tokens, merges, pattern=PATTERN, extra=()):
    """tokens are ids 0.., then the specials, then `extra` (plain tokens)."""
    vocab = {t: i for i, t in enumerate(list(tokens) + SPECIALS + list(extra))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    return tok


def cases():
    base = [
        "Hello world", "Hello, world!", " hello", "  hello  world  ", "hello\nworld", "hello\n\nworld\n",
        "line one\r\nline two\r\n", "\ttab\tseparated\tvalues", "trailing spaces   ", "   leading spaces",
        "The quick brown fox jumps over the lazy dog.", "I'm sure it's fine, we'll see, they'd know, you've been.",
        "DON'T SHOUT, I'LL HEAR YOU", "rock'n'roll", "can't won't shan't", "it'sa I'mhere they'llbe 'reality'",
        "O'Reilly's 'Ses' 'DD'", "12345", "3.14159265358979",
        "1,000,000 dollars", "version 2.5.1-rc3", "phone: +1 (555) 123-4567", "2024-11-29T12:00:00Z",
        "你好，世界", "日本語のテキストです。", "한국어 문장입니다", "中文English混合text", "Привет, мир!",
        "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "café naïve résumé",
        "emoji 🙂🙃 and more 🚀🔥", "family 👨‍👩‍👧‍👦 flag 🇺🇸", "a✓b✗c", "math: ∑∫√∞ ≠ ≤ ≥",
        "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; i++) { sum += a[i]; }", "<div class=\"x\">hi</div>",
        "https://example.com/path?query=1&b=2#frag", "user@example.com", "snake_case camelCase PascalCase",
        "!!!???...", "---===+++", "(parenthesized) [bracketed] {braced}", "\"quoted\" 'single'", "a  b   c    d",
        "\n\n\n", "   ", "\t", "x", "", "ALL CAPS SENTENCE", "MiXeD cAsE", "naïve café über straße",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        "text<|endoftext|>more text", "<|fim_prefix|>def<|fim_suffix|>\n<|fim_middle|>",
        "<tool_call>{\"name\": \"f\"}</tool_call>", "<|im_start", "<|im_end|><|im_end|>",
        "tab\t \tspace mix", "zero-width\u200bjoiner", "non\u00a0breaking\u00a0space", "ideographic\u3000space",
        "em\u2003space", "ellipsis…", "«guillemets»", "⁂ ※ ¶ §", "1st 2nd 3rd 4th", "½ ¾ ⅓", "Ⅻ roman",
        "١٢٣ arabic digits", "٣.١٤", "x²+y³", "H₂O", "ℕℤℚℝℂ", "🙂" * 5, "a" * 40, " " * 17 + "x",
    ]
    out = []
    for s in base:
        out += [s, " " + s, s + "\n", s + " " + s]
    return [s for s in dict.fromkeys(out)]


def write_gguf(path, tokens, merges, pre="qwen2", extra=()):
    w = gguf.GGUFWriter(path, arch="tokenizer")
    all_tokens = tokens + SPECIALS + list(extra)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(all_tokens)
    w.add_token_types([1] * len(tokens) + [3] * len(SPECIALS) + [1] * len(extra))
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_eos_token_id(len(tokens) + 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_cases(path, tok, texts):
    with open(path, "w") as f:
        for s in texts:
            assert unicodedata.normalize("NFC", s) == s, "cases are NFC, so the normalizer is a no-op"
            ids = tok.encode(s, add_special_tokens=False).ids
            f.write(s.encode("utf-8").hex() + "\t" + " ".join(map(str, ids)) + "\n")


def main(outdir):
    tokens, merges = vocabulary()
    texts = cases()
    write_gguf(os.path.join(outdir, "qwen_vocab.gguf"), tokens, merges)
    write_cases(os.path.join(outdir, "cases.txt"), hf_tokenizer(tokens, merges), texts)
    # Qwen's vocabulary has single digits only, which would hide how numbers
    # are split: give the Llama 3 variant every 2- and 3-digit string too.
    digits = [f"{i:02d}" for i in range(100)] + [f"{i:03d}" for i in range(1000)]
    digit_merges = [(d[0], d[1]) for d in digits[:100]] + [(d[:2], d[2]) for d in digits[100:]]
    write_gguf(os.path.join(outdir, "llama3_split.gguf"), tokens, merges + digit_merges, pre="llama-bpe", extra=digits)
    write_cases(os.path.join(outdir, "llama3_cases.txt"),
                hf_tokenizer(tokens, merges + digit_merges, LLAMA3_PATTERN, digits), texts)
    print(f"{len(tokens)} tokens, {len(merges)} merges, {len(SPECIALS)} specials, {len(texts)} cases")


if __name__ == "__main__":
    main(sys.argv[1])
