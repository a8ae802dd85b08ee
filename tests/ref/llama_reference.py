"""Records llama.cpp's answers for the real model, for minfer's agreement tests
(tests/test_real_model.c). Run once by hand, not in CI:

    pip install llama-cpp-python==0.3.36      # builds llama.cpp from source
    tools/fetch-model.sh
    python3 tests/ref/llama_reference.py models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
        tests/fixtures/data/qwen2.5-coder-0.5b.llama.txt
    tools/fetch-model.sh gemma3-270m
    python3 tests/ref/llama_reference.py models/gemma-3-270m-q4_k_m.gguf \
        tests/fixtures/data/gemma-3-270m.llama.txt 1024 f32

The optional arguments are the perplexity's window (Gemma: 1024, past its
512-token sliding window) and the KV cache's type (Gemma: f32; llama.cpp's
default f16 cache moves Gemma's logits by up to 3 at the third position,
while f32 agrees with minfer and with a numpy transcription of the
transformers forward to 0.1).
    python3 tests/ref/llama_reference.py MODEL --bench     # pp128 / pp512 / tg128 on this machine

The fixture (plain text, read by the C test):
    model <file name> <bytes> <llama-cpp-python version> [kv <f16|f32>]
    prompt <name> <bytes of text> <n positions>     then the text itself and a newline,
        then a line of the n token ids llama.cpp made of it,
        then n lines: <log-sum-exp of all logits> and 20 pairs <id> <logit>, best first
    perplexity <file> <n_ctx> <n_windows> <ppl> <stderr> <running ppl after each window...>
    greedy <n prompt ids> <ids...> <n generated> <ids...>
"""
import os
import sys
import time

import numpy as np
from llama_cpp import Llama, __version__

POSITIONS = 64
TOP = 20
CORPUS = "/usr/share/common-licenses/GPL-3"

QUESTION = ("I have a list of dictionaries with 'name' and 'age' keys. How do I sort it by age, "
            "oldest first, and keep people of the same age in alphabetical order?")
ANSWER = "You can sort with a key that negates the age and keeps the name as it is:"
# The chat turn in each model's own format.
CHATS = {
    "qwen2": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
             f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n{ANSWER}",
    "gemma3": f"<start_of_turn>user\n{QUESTION}<end_of_turn>\n<start_of_turn>model\n{ANSWER}",
}
# Four kinds of text, written for this fixture: a chat turn, code, Chinese, long English.
PROMPTS = {
    "chat": None,  # CHATS[the model's architecture]
    "code": "import heapq\n\n\ndef dijkstra(graph, source):\n    \"\"\"Shortest distances from source in a graph given "
            "as {node: [(neighbour, weight), ...]}.\"\"\"\n    dist = {source: 0}\n    queue = [(0, source)]\n"
            "    while queue:\n        d, node = heapq.heappop(queue)\n        if d > dist.get(node, float('inf')):\n"
            "            continue\n        for neighbour, weight in graph.get(node, []):\n",
    "chinese": "春天来了，山上的雪慢慢融化，河水变得清澈起来。村子里的孩子们放学以后喜欢跑到河边，"
               "看小鱼在石头之间游来游去。老人们坐在树下喝茶，聊着今年的收成和城里的新闻。"
               "到了傍晚，炊烟从每家的屋顶升起，空气中飘着饭菜的香味，远处传来几声狗叫。",
    "english": "The old lighthouse keeper had kept a logbook for forty years, and every entry began the same way: "
               "the date, the direction of the wind, and the colour of the sea at dawn. When the lighthouse was "
               "finally automated, the engineers who came to install the new lamp found the books stacked in "
               "the storeroom, hundreds of them, and spent an evening reading the entries aloud to one another "
               "while the rain beat against the windows.",
}
GREEDY_PROMPT = "chat"
GREEDY_TOKENS = 16


def logsumexp(x):
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x.astype(np.float64) - m))))


def teacher_forced(llm, out):
    for name, text in PROMPTS.items():
        ids = llm.tokenize(text.encode(), add_bos=llm._model.add_bos_token(), special=True)
        if len(ids) < POSITIONS:
            sys.exit(f"prompt {name} has {len(ids)} tokens, fewer than {POSITIONS}")
        ids = ids[:POSITIONS]
        llm.reset()
        llm.eval(ids)
        raw = text.encode()
        out.write(f"prompt {name} {len(raw)} {POSITIONS}\n")
        out.write(raw.decode() + "\n")
        out.write(" ".join(map(str, ids)) + "\n")
        for p in range(POSITIONS):
            row = np.asarray(llm.scores[p], dtype=np.float32)
            top = np.argsort(-row, kind="stable")[:TOP]
            out.write(f"{logsumexp(row):.6f} " + " ".join(f"{i} {row[i]:.6f}" for i in top) + "\n")


def perplexity(llm, n_ctx, out):
    """llama.cpp's perplexity method (examples/perplexity): windows of n_ctx,
    the first token of each replaced by BOS when the vocabulary adds one,
    the second half scored."""
    text = open(CORPUS, "rb").read()
    add_bos = llm._model.add_bos_token()
    tokens = llm.tokenize(text, add_bos=add_bos, special=True)
    n_windows = len(tokens) // n_ctx
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    running = []
    for w in range(n_windows):
        win = list(tokens[w * n_ctx:(w + 1) * n_ctx])
        if add_bos:
            win[0] = llm.token_bos()
        llm.reset()
        llm.eval(win)
        for i in range(first, n_ctx - 1):
            row = np.asarray(llm.scores[i], dtype=np.float32)
            lp = float(row[win[i + 1]]) - logsumexp(row)
            nll -= lp
            nll2 += lp * lp
            count += 1
        running.append(float(np.exp(nll / count)))
        print(f"[{w + 1}]{running[-1]:.4f}", end=",", flush=True)
    mean = nll / count
    var = nll2 / count - mean * mean
    ppl = float(np.exp(mean))
    err = float(np.sqrt(var / (count - 1)) * ppl) if var > 0 else 0.0
    print(f"\nFinal estimate: PPL = {ppl:.4f} +/- {err:.5f}")
    out.write(f"perplexity {CORPUS} {n_ctx} {n_windows} {ppl:.6f} {err:.6f} " +
              " ".join(f"{r:.6f}" for r in running) + "\n")


def greedy(llm, out):
    ids = llm.tokenize(PROMPTS[GREEDY_PROMPT].encode(), add_bos=llm._model.add_bos_token(), special=True)
    llm.reset()
    llm.eval(ids)
    made = []
    for _ in range(GREEDY_TOKENS):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        made.append(tok)
        llm.eval([tok])
    out.write(f"greedy {len(ids)} " + " ".join(map(str, ids)) + f" {len(made)} " + " ".join(map(str, made)) + "\n")
    print("greedy:", llm.detokenize(made).decode(errors="replace"))


def bench(model, threads):
    llm = Llama(model_path=model, n_ctx=1024, n_batch=512, n_threads=threads, n_threads_batch=threads,
                verbose=False)
    n_vocab = llm.n_vocab()
    pp = [(i * 7919 + 13) % n_vocab for i in range(512)]
    rows = []
    for name, n, run in (("pp128", 128, lambda: llm.eval(pp[:128])), ("pp512", 512, lambda: llm.eval(pp)),
                         ("tg128", 128, lambda: [llm.eval([pp[i]]) for i in range(128)])):
        speeds = []
        for _ in range(3):
            llm.reset()  # the next eval drops the cached positions
            t0 = time.perf_counter()
            run()
            speeds.append(n / (time.perf_counter() - t0))
        rows.append((name, np.mean(speeds), np.std(speeds)))
    print(f"| llama.cpp (llama-cpp-python {__version__}) | threads | test | t/s |")
    for name, mean, sd in rows:
        print(f"| | {threads} | {name} | {mean:.2f} ± {sd:.2f} |")


def main():
    model = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "--bench":
        bench(model, int(sys.argv[3]) if len(sys.argv) > 3 else 2)
        return
    n_ctx = int(sys.argv[3]) if len(sys.argv) > 3 else 512
    kv = sys.argv[4] if len(sys.argv) > 4 else "f16"
    ggml_type = {"f32": 0, "f16": 1}[kv]
    llm = Llama(model_path=model, n_ctx=n_ctx, n_batch=512, n_threads=2, logits_all=True, verbose=False,
                type_k=ggml_type, type_v=ggml_type)
    PROMPTS["chat"] = CHATS[llm.metadata["general.architecture"]]
    with open(sys.argv[2], "w") as out:
        out.write(f"model {os.path.basename(model)} {os.path.getsize(model)} {__version__} kv {kv}\n")
        teacher_forced(llm, out)
        greedy(llm, out)
        perplexity(llm, n_ctx, out)


if __name__ == "__main__":
    main()
