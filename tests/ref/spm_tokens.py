"""spm_tokens.py: llama.cpp's token ids (llama-cpp-python, vocab only) for a
fixed set of strings, written as the fixture the SentencePiece tokenizer is
checked against (tests/test_real_gemma.c).

usage: spm_tokens.py MODEL.gguf OUT.txt
    (tests/fixtures/data/gemma-3-270m.tokens.txt was made with
     models/gemma-3-270m-q4_k_m.gguf from tools/fetch-model.sh gemma3-270m;
     gemma-3-270m-space-prefix.tokens.txt with the vocabulary
     tests/ref/spm_vocab.py makes from it)
The file: a line "model NAME BYTES llama_cpp VERSION", then for each string
a line "case N_BYTES N_IDS", the string's bytes and a newline, its ids on
one line.
The strings: ASCII prose and code, whitespace runs, digits, CJK, emoji,
mixed scripts, special tokens; each with BOS and special tokens parsed, as
`minfer tokenize` does."""
import os
import sys

import llama_cpp

BASE = [
    "Hello world", "Hello, world!", " leading space", "trailing space ", "  two leading", "a  b   c    d",
    "\ttab\tseparated\t", "line one\nline two", "\n\n\nnewlines\n\n", "\r\nwindows\r\n", "", " ", "  ", "\n",
    "The capital of France is", "The quick brown fox jumps over the lazy dog.", "I'm sure you're right; it's fine.",
    "e-mail: someone@example.com, url: https://example.org/a?b=c&d=e#f", "C:\\Program Files\\minfer",
    "1", "12", "123", "1234", "12345", "3.14159", "-42", "1,000,000", "2026-11-30 04:05:06", "0x1F 0b1010 1e-9",
    "def f(x):\n    return x * 2\n", "int main(void) { return 0; }", "for (int i = 0; i < n; i++) {}",
    "    indented\n        more\n", "<html><body>hi</body></html>", "{\"key\": [1, 2, 3]}", "a+b=c; a-b==d || e != f",
    "你好，世界", "日本語のテキストです。", "한국어 문장입니다", "中文和English混合", "Привет, мир!", "Γειά σου Κόσμε",
    "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Tiếng Việt có dấu", "Ünïcödé àccénts ñ ß ø",
    "😀", "👍🏽", "🇫🇷 flag", "👨‍👩‍👧‍👦 family", "emoji 🎉 in 🚀 text ✨", "∑ ∫ √ ∞ ≠ ≤ ≥", "™ © ® ° ± µ",
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos>text", "a<eos>b", "<unk>", "<pad><mask>",
    "<start_of_image>", "not <start_of_turn a tag", "<<>>", "＜full width＞", "\u00a0non-breaking\u00a0space",
    "zero\u200bwidth", "combining e\u0301", "\x7f\x01control", "tabs\t\t\tand  spaces", "end.",
]
WORDS = ["the", "minfer", "tokenizer", "Gemma", "SentencePiece", "byte", "fallback", "日本", "数据", "ok", "A",
         "naïve", "café", "42", "  ", "\n", "🙂", "llama.cpp", "GPU", "über"]


def strings():
    out = list(BASE)
    x = 12345
    while len(out) < 240:  # deterministic mixtures of words and separators
        x = (x * 1103515245 + 12345) % (1 << 31)
        n = 1 + x % 7
        parts = []
        for _ in range(n):
            x = (x * 1103515245 + 12345) % (1 << 31)
            parts.append(WORDS[x % len(WORDS)])
            parts.append([" ", "", "  ", "\n", ", "][x % 5])
        out.append("".join(parts))
    return out


def main():
    model, dest = sys.argv[1], sys.argv[2]
    m = llama_cpp.Llama(model, vocab_only=True, verbose=False)
    with open(dest, "wb") as f:
        f.write(b"model %s %d llama_cpp %s\n" % (model.split("/")[-1].encode(), os.path.getsize(model),
                                                 llama_cpp.__version__.encode()))
        for s in strings():
            b = s.encode()
            ids = m.tokenize(b, add_bos=True, special=True)
            f.write(b"case %d %d\n%s\n%s\n" % (len(b), len(ids), b, " ".join(map(str, ids)).encode()))
    print("%s: %d strings" % (dest, len(strings())))


if __name__ == "__main__":
    main()
