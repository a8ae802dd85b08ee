"""server_check.py: `minfer serve` checked from outside, with the official
`openai` client (PyPI) and raw HTTP. Each case starts its own server on a
free loopback port (--port 0; the URL line says which) and stops it with
SIGTERM, which must end it with status 0 (under ASan: no leaks).

usage: server_check.py CASE MINFER_BIN MODEL   (server_check.py --cases: their names)
Prints what it checked; exits 1 with the reason on the first failure."""
import atexit
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

BIN, MODEL = (sys.argv[2], sys.argv[3]) if len(sys.argv) == 4 else (None, None)


SERVERS = []  # every server started, for fail() to report on


def fail(msg):
    print("FAIL:", msg)
    for srv in SERVERS:  # whether it still runs, and what it said last
        rc = srv.p.poll()
        print("  the server on port %s: %s; its log's last lines:\n%s" % (
            getattr(srv, "port", "?"), "running" if rc is None else "exited with %d" % rc,
            "".join("    " + line for line in srv.log[-40:])))
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Server:
    def __init__(self, *flags, env=None):
        self.p = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", "0", "--device", "cpu-fast", "-t", "1", *flags],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        atexit.register(lambda: self.p.poll() is None and self.p.kill())  # a failed check leaves no server behind
        self.log = []
        SERVERS.append(self)
        deadline = time.time() + 120
        while True:
            line = self.p.stderr.readline()
            if not line:
                fail("the server ended before listening: " + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
            check(time.time() < deadline, "the server did not start in 120 s")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.p.stderr:
            self.log.append(line)

    def url(self):
        return "http://127.0.0.1:%d/v1" % self.port

    def rss_kib(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("the server did not stop within 60 s of SIGTERM")
        time.sleep(0.1)
        check(rc == 0, "the server exited with %d after SIGTERM; its log:\n%s" % (rc, "".join(self.log[-40:])))


def raw(port, method, path, body=None, headers=None, timeout=60):
    """status, parsed JSON (or None) of one plain HTTP request"""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, None


def expect_error(port, method, path, body, status, param=None, words=None, headers=None):
    got, j = raw(port, method, path, body, headers)
    check(got == status, "%s %s %r: status %d, want %d (%r)" % (method, path, body if not isinstance(body, bytes) or
                                                               len(body) < 80 else "<%d bytes>" % len(body), got, status, j))
    check(j and set(j.get("error", {})) >= {"message", "type", "param", "code"},
          "%s %s: not an OpenAI error object: %r" % (method, path, j))
    e = j["error"]
    check(param is None or e["param"] == param, "param %r, want %r (%s)" % (e["param"], param, e["message"]))
    check(words is None or words in e["message"], "message %r lacks %r" % (e["message"], words))
    print("  %d %s: %s" % (status, e["param"], e["message"]))


def too_big(port, path):
    """a body over the limit: refused from its Content-Length, before it is read"""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    n = (1 << 20) + 1
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" %
              (path.encode(), n))
    try:
        s.sendall(b"x" * n)
    except OSError:
        pass  # the server may close before taking it all
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 10:
        got = s.recv(65536)
        if not got:
            break
        data += got
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 413"), "an oversized body: %r" % head[:80])
    e = json.loads(body[body.index(b"{"):body.rindex(b"}") + 1])["error"]
    check("limit" in e["message"], "413 message %r" % e["message"])
    print("  413 %s" % e["message"])


def client(srv):
    import openai
    return openai.OpenAI(base_url=srv.url(), api_key="none", max_retries=0, timeout=120)


def case_client():
    srv = Server("-c", "1024")
    c = client(srv)
    models = c.models.list()
    check([m.id for m in models.data] == [os.path.basename(MODEL)], "models: %r" % models)
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello."}]
    r = c.chat.completions.create(model="m", messages=msgs, max_tokens=12, temperature=0)
    text = r.choices[0].message.content
    check(r.choices[0].message.role == "assistant" and text, "chat: %r" % r)
    check(r.usage.completion_tokens == 12 and r.choices[0].finish_reason == "length", "chat usage: %r" % r.usage)
    check(r.usage.total_tokens == r.usage.prompt_tokens + 12, "chat totals: %r" % r.usage)
    print("  chat: %d prompt tokens, %r" % (r.usage.prompt_tokens, text[:40]))
    # streaming: the deltas add up to the same greedy text
    chunks = list(c.chat.completions.create(model="m", messages=msgs, max_tokens=12, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(streamed == text, "streamed %r != whole %r" % (streamed, text))
    check(chunks[-1].usage and chunks[-1].usage.completion_tokens == 12, "stream usage: %r" % chunks[-1])
    check([ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length", "stream finish")
    print("  streaming chat: %d chunks, same text" % len(chunks))
    # completions, whole and streamed
    r = c.completions.create(model="m", prompt="The capital of France is", max_tokens=8, temperature=0)
    ptext = r.choices[0].text
    check(ptext and r.usage.completion_tokens == 8, "completion: %r" % r)
    s = "".join(ch.choices[0].text for ch in c.completions.create(model="m", prompt="The capital of France is",
                                                                   max_tokens=8, temperature=0, stream=True))
    check(s == ptext, "streamed completion %r != %r" % (s, ptext))
    print("  completions: %r, streamed the same" % ptext[:40])
    # stop strings: the text ends before the stop string
    if len(ptext) > 6:
        stop = ptext[3:6]
        r = c.completions.create(model="m", prompt="The capital of France is", max_tokens=8, temperature=0, stop=[stop])
        check(r.choices[0].text == ptext[:ptext.index(stop)] and r.choices[0].finish_reason == "stop",
              "stop %r: %r" % (stop, r.choices[0]))
        print("  stop %r: %r" % (stop, r.choices[0].text))
    # seeded sampling repeats
    a = [c.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=1.0, seed=42).choices[0]
         .message.content for _ in range(2)]
    check(a[0] == a[1], "seed 42 twice: %r" % a)
    print("  seed 42 twice: the same text")
    # multi-turn: the second turn reuses the first's cache and gives a fresh request's text
    turn1 = msgs + [{"role": "assistant", "content": text}, {"role": "user", "content": "And again?"}]
    r2 = c.chat.completions.create(model="m", messages=turn1, max_tokens=12, temperature=0)
    cached = r2.usage.prompt_tokens_details.cached_tokens
    check(cached >= 10, "the second turn reused %d tokens" % cached)
    t2 = r2.model_extra.get("timings", {})
    check(t2.get("cache_n") == cached and t2.get("prompt_n") == r2.usage.prompt_tokens - cached, "timings %r" % t2)
    srv.stop()
    fresh = Server("-c", "1024")
    r3 = client(fresh).chat.completions.create(model="m", messages=turn1, max_tokens=12, temperature=0)
    check(r3.usage.prompt_tokens_details.cached_tokens == 0, "a fresh server had a cache")
    check(r3.choices[0].message.content == r2.choices[0].message.content,
          "reused %r != fresh %r" % (r2.choices[0].message.content, r3.choices[0].message.content))
    print("  second turn: %d of %d prompt tokens from the cache, the same text as a fresh server" %
          (cached, r2.usage.prompt_tokens))
    fresh.stop()


def case_errors():
    srv = Server("-c", "256")
    p = srv.port
    chat = "/v1/chat/completions"
    ok = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    expect_error(p, "POST", chat, b"{not json", 400, None, "not valid JSON")
    expect_error(p, "POST", chat, b"[1, 2]", 400, None, "JSON object")
    expect_error(p, "POST", chat, dict(ok, max_tokens="5"), 400, "max_tokens")
    expect_error(p, "POST", chat, dict(ok, max_tokens=2.5), 400, "max_tokens")
    expect_error(p, "POST", chat, dict(ok, temperature="hot"), 400, "temperature")
    expect_error(p, "POST", chat, dict(ok, temperature=7), 400, "temperature")
    expect_error(p, "POST", chat, dict(ok, stream="yes"), 400, "stream")
    expect_error(p, "POST", chat, dict(ok, stop=[1]), 400, "stop")
    expect_error(p, "POST", chat, dict(ok, n=3), 400, "n")
    expect_error(p, "POST", chat, dict(ok, tools=[{"type": "function"}]), 400, "tools", "not supported")
    expect_error(p, "POST", chat, {"messages": []}, 400, "messages", "non-empty")
    expect_error(p, "POST", chat, {"max_tokens": 3}, 400, "messages", "required")
    expect_error(p, "POST", chat, {"messages": "hi"}, 400, "messages")
    expect_error(p, "POST", chat, {"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages[0].role",
                 "unknown role 'wizard'")
    expect_error(p, "POST", chat, {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content")
    expect_error(p, "POST", chat, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
                 "messages[0].content")
    expect_error(p, "POST", chat, dict(ok, max_tokens=250), 400, "max_tokens", "exceed the context of 256")
    expect_error(p, "POST", chat, {"messages": [{"role": "user", "content": "word " * 400}]}, 400, "messages",
                 "context holds 256")
    expect_error(p, "POST", "/v1/completions", {"prompt": 7}, 400, "prompt")
    expect_error(p, "POST", "/v1/completions", {"prompt": ""}, 400, "prompt", "empty")
    too_big(p, chat)
    expect_error(p, "GET", "/v1/nowhere", None, 404, None, "no endpoint")
    expect_error(p, "GET", chat, None, 405, None, "takes POST")
    expect_error(p, "POST", "/v1/models", b"{}", 405, None, "takes GET")
    expect_error(p, "POST", chat, b"[" * 200000 + b"]" * 200000, 400, None, "not valid JSON")  # nesting past cJSON's limit
    status, j = raw(p, "POST", "/v1/completions", b'{"prompt": "\xff\xfe bytes \xc3", "max_tokens": 2}')
    check(status in (200, 400), "a prompt that is not UTF-8: %d %r" % (status, j))
    status, j = raw(p, "POST", chat, ok)  # still serving after all of that
    check(status == 200 and j["choices"][0]["message"]["role"] == "assistant", "after the errors: %d %r" % (status, j))
    print("  200 after the malformed requests")
    srv.stop()


def case_auth():
    srv = Server("--api-key", "s3cret")
    p = srv.port
    body = {"prompt": "hi", "max_tokens": 2}
    expect_error(p, "POST", "/v1/completions", body, 401, None, "API key")
    expect_error(p, "GET", "/v1/models", None, 401, None, "API key",
                 headers={"Authorization": "Bearer wrong"})
    check(raw(p, "GET", "/health")[0] == 200, "/health needs no key")
    import openai
    try:
        openai.OpenAI(base_url=srv.url(), api_key="wrong", max_retries=0).models.list()
        fail("a wrong key was accepted")
    except openai.AuthenticationError:
        pass
    r = openai.OpenAI(base_url=srv.url(), api_key="s3cret", max_retries=0).completions.create(
        model="m", prompt="hi", max_tokens=2)
    check(r.usage.completion_tokens == 2, "with the key: %r" % r)
    print("  401 without the key or with a wrong one; 200 with it; /health open")
    srv.stop()


def hammer(port, clients, per_client, stream_every=3):
    """clients threads x per_client chat requests; returns the statuses"""
    statuses, lock = [], threading.Lock()

    def one(i, k):
        body = {"messages": [{"role": "user", "content": "client %d request %d" % (i, k)}], "max_tokens": 6,
                "temperature": 0.7, "seed": k, "stream": (i + k) % stream_every == 0}
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        if r.status == 200 and body["stream"]:
            check(data.rstrip().endswith("data: [DONE]"), "a stream without its end: %r" % data[-200:])
        elif r.status == 200:
            check(json.loads(data)["usage"]["completion_tokens"] == 6, "reply: %r" % data)
        else:
            check(r.status == 503 and json.loads(data)["error"]["code"] == "overloaded", "%d %r" % (r.status, data))
        with lock:
            statuses.append(r.status)

    errors = []

    def client_thread(i):
        for k in range(per_client):
            try:
                one(i, k)
            except (OSError, http.client.HTTPException) as x:  # the client's view of a failure, for the report
                with lock:
                    errors.append("client %d request %d: %r" % (i, k, x))
                return

    ts = [threading.Thread(target=client_thread, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(len(statuses) == clients * per_client, "%d of %d requests answered; %s" %
          (len(statuses), clients * per_client, "; ".join(errors) or "no client saw an error"))
    return statuses


def case_load():
    # Under ASan, freed memory waits in a quarantine (up to 256 MiB) that
    # would read as growth: this case turns it off, so the bound means the
    # same in both builds (LeakSanitizer still checks at exit).
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") +
               ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0")
    srv = Server("--parallel", "2", "-c", "256", "--queue", "16", env=env)
    hammer(srv.port, 2, 5)  # warm up: both slots and their graphs
    before = srv.rss_kib()
    t0 = time.time()
    st = hammer(srv.port, 8, 25)
    after = srv.rss_kib()
    check(all(s == 200 for s in st), "statuses %r" % sorted(set(st)))
    # under ThreadSanitizer its shadow memory grows with the new addresses the allocator hands out
    bound = (32 if os.environ.get("SERVER_CHECK_SANITIZER") == "thread" else 8) * 1024
    check(after - before <= bound, "memory grew %d KiB over the run (bound %d)" % (after - before, bound))
    print("  8 clients x 25 requests, --parallel 2: all 200 in %.1f s; RSS %d -> %d KiB (bound +%d)" %
          (time.time() - t0, before, after, bound))
    srv.stop()


def case_queue():
    srv = Server("--parallel", "1", "--queue", "1", "-c", "256")
    st = hammer(srv.port, 8, 5, stream_every=2)
    n503 = st.count(503)
    check(n503 > 0 and st.count(200) > 0 and n503 + st.count(200) == len(st), "statuses %r" % st)
    print("  --parallel 1 --queue 1, 8 clients x 5: %d answered, %d refused with 503" % (st.count(200), n503))
    srv.stop()


def send_completion(port, body):
    """a raw request on a socket the caller closes when it likes"""
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d"
              b"\r\n\r\n%s" % (len(data), data))
    return s


def slot_freed(srv, note):
    """after a client left: the one slot free again within 3 s, and the log
    line with note saying the generation stopped well short of its 4000
    tokens; returns (seconds waited, tokens made)"""
    t0 = time.time()
    while True:
        status, j = raw(srv.port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
        if status == 200:
            break
        check(status == 503, "%d %r" % (status, j))
        check(time.time() - t0 < 3, "the slot was still busy %.1f s after the client left" % (time.time() - t0))
        time.sleep(0.05)
    waited = time.time() - t0
    time.sleep(0.3)
    closed = [l for l in srv.log if note in l]
    check(closed, "no log line saying '%s'" % note)
    made = int(re.search(r"\+ (\d+) generated", closed[0]).group(1))
    check(made < 2000, "the abandoned generation went on to %d of its 4000 tokens" % made)
    return waited, made


def case_disconnect():
    srv = Server("--parallel", "1", "--queue", "0", "-c", "4096")
    s = send_completion(srv.port, {"prompt": "Once", "max_tokens": 4000, "stream": True, "temperature": 0})
    got, t0 = b"", time.time()
    while b"data: " not in got and time.time() - t0 < 30:
        got += s.recv(4096)
    check(b"data: " in got, "no stream started: %r" % got[:200])
    s.close()
    waited, made = slot_freed(srv, "client closed the stream")
    print("  a client that left mid-stream freed the slot in %.2f s, after %d of its 4000 tokens" % (waited, made))
    # the same for a whole (not streamed) reply: the server looks between tokens
    s = send_completion(srv.port, {"prompt": "Twice", "max_tokens": 4000, "temperature": 0})
    time.sleep(0.2)
    s.close()
    waited, made = slot_freed(srv, "client closed before the reply")
    print("  a client that left before its whole reply freed the slot in %.2f s, after %d of its 4000 tokens" %
          (waited, made))
    srv.stop()


def case_gemma_format():
    """a format without a system turn (Gemma's): the system message starts the first user turn, or is refused"""
    srv = Server("-c", "256", "--chat-template", "gemma")
    p, chat = srv.port, "/v1/chat/completions"
    sys_msg, user = {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}
    alone = raw(p, "POST", chat, {"messages": [user], "max_tokens": 2})
    joined = raw(p, "POST", chat, {"messages": [sys_msg, user], "max_tokens": 2})
    check(alone[0] == 200 and joined[0] == 200, "%r %r" % (alone, joined))
    # "Be brief.\n\n" joins the user turn: more prompt tokens, but no turn of its own
    check(joined[1]["usage"]["prompt_tokens"] > alone[1]["usage"]["prompt_tokens"], "%r %r" % (alone, joined))
    expect_error(p, "POST", chat, {"messages": [user, sys_msg], "max_tokens": 2}, 400, "messages[1].role",
                 "system message only first")
    expect_error(p, "POST", chat, {"messages": [sys_msg, {"role": "assistant", "content": "x"}], "max_tokens": 2}, 400,
                 "messages[0].role", "before a user message")
    srv.stop()


CASES = {"gemma_format": case_gemma_format, "client": case_client, "errors": case_errors, "auth": case_auth, "load": case_load, "queue": case_queue,
         "disconnect": case_disconnect}
if __name__ == "__main__":
    if sys.argv[1:] == ["--cases"]:
        print(" ".join(CASES))
        sys.exit(0)
    if len(sys.argv) != 4 or sys.argv[1] not in CASES:
        sys.exit(__doc__)
    CASES[sys.argv[1]]()
    print("ok")
