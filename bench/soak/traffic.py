"""Open-loop serving traffic: requests arrive as a Poisson process whose
rate follows a curve over time, whatever the answers do (a slow service
does not slow the arrivals, so its latency is not hidden: coordinated
omission is avoided by timing each request from its scheduled arrival).
Each request is a streamed OpenAI completion through the gateway; the
client records its status, time to first token, tokens and duration.

A small asyncio HTTP/1.1 client (one connection per request, as many
independent users would open) reads the server-sent events as they come."""
import asyncio
import json
import random
import threading
import time


class Result:
    __slots__ = ("sched", "start", "status", "ttft", "end", "tokens", "error", "replica",
                 "version", "stream_ok")

    def __init__(self, sched):
        self.sched, self.start = sched, None
        self.status, self.ttft, self.end, self.tokens = 0, None, None, 0
        self.error, self.replica, self.version, self.stream_ok = None, None, None, False

    def ok(self):
        return self.status == 200 and self.stream_ok and self.error is None

    def as_row(self):
        return [round(self.sched, 4), self.status, None if self.ttft is None else round(self.ttft, 4),
                None if self.end is None else round(self.end - self.sched, 4), self.tokens,
                self.error, self.version, self.ok()]


async def _read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body_chunks(reader, headers):
    """Yields the body's bytes as they arrive (chunked or Content-Length)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif "content-length" in headers:
        n = int(headers["content-length"])
        if n:
            yield await reader.readexactly(n)
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data


async def one_request(host, port, body, res, timeout):
    """Sends one streamed completion and fills res."""
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
        payload = json.dumps(body).encode()
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % (host.encode(), port, len(payload)) + payload)
        await writer.drain()
        res.status, headers = await asyncio.wait_for(_read_head(reader), timeout)
        res.replica = headers.get("x-starcloud-replica")
        res.version = headers.get("x-starcloud-version")
        buf = b""
        deadline = time.time() + timeout
        agen = _body_chunks(reader, headers)
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise asyncio.TimeoutError()
            try:
                chunk = await asyncio.wait_for(agen.__anext__(), left)
            except StopAsyncIteration:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    data = line[6:]
                    if data == b"[DONE]":
                        res.stream_ok = res.status == 200 and res.error is None
                        continue
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        res.error = "bad event"
                        continue
                    if "error" in obj:
                        res.error = str(obj["error"].get("code") or obj["error"].get("message")
                                        if isinstance(obj["error"], dict) else obj["error"])
                        continue
                    ch = obj.get("choices") or [{}]
                    n = len(ch[0].get("token_ids") or []) or (1 if ch[0].get("text") else 0)
                    if n and res.ttft is None:
                        res.ttft = time.time() - res.sched
                    res.tokens += n
        if res.status != 200 and res.error is None:
            try:
                res.error = json.loads(buf or b"{}").get("error", {}).get("code") or "http %d" % res.status
            except (ValueError, AttributeError):
                res.error = "http %d" % res.status
        elif res.status == 200 and not res.stream_ok and res.error is None:
            res.error = "stream cut"
    except asyncio.TimeoutError:
        res.error = "client timeout"
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
        res.error = type(e).__name__
    finally:
        res.end = time.time()
        if writer:
            writer.close()


SYSTEM = "You are a helpful assistant. Answer briefly and precisely. "


class Traffic(threading.Thread):
    """Runs the open-loop load on its own event loop thread. rate_fn(t)
    gives requests per second at t seconds after start."""

    # Llama-style requests: a system preamble and a question, 60 to 180
    # bytes (prompt tokens for the byte-level tokenizer), longer than the
    # answers, so prefill has work of its own to scale on.
    PROMPTS = [SYSTEM + q for q in (
        "Once upon a time", "Tell me how the cluster scheduler places a gang of eight workers.",
        "In a galaxy far away, what would a GPU cluster look like?",
        "Write a haiku about GPUs", "Explain prefill and decode, and why they run apart, in "
        "two sentences for an engineer new to serving.", "Hello")]

    def __init__(self, url, model, rate_fn, seconds, seed=5, max_tokens=(16, 48),
                 timeout=30.0, max_open=400):
        super().__init__(daemon=True)
        hostport = url.split("://", 1)[1]
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)
        self.model, self.rate_fn, self.seconds = model, rate_fn, seconds
        self.rnd = random.Random(seed)
        self.max_tokens, self.timeout, self.max_open = max_tokens, timeout, max_open
        self.results = []
        self.dropped = 0   # arrivals not sent because max_open were open (client side)
        self.t0 = None
        self.stop_evt = threading.Event()
        self.lock = threading.Lock()

    def run(self):
        asyncio.run(self._main())

    async def _main(self):
        self.t0 = time.time()
        open_tasks = set()
        t = 0.0
        while t < self.seconds and not self.stop_evt.is_set():
            rate = max(self.rate_fn(t), 1e-3)
            t += self.rnd.expovariate(rate)
            at = self.t0 + t
            delay = at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if len(open_tasks) >= self.max_open:
                self.dropped += 1
                continue
            body = {"model": self.model, "prompt": self.rnd.choice(self.PROMPTS),
                    "max_tokens": self.rnd.randint(*self.max_tokens), "stream": True,
                    "temperature": 0}
            res = Result(at)
            with self.lock:
                self.results.append(res)
            task = asyncio.ensure_future(one_request(self.host, self.port, body, res,
                                                     self.timeout))
            open_tasks.add(task)
            task.add_done_callback(open_tasks.discard)
        if open_tasks:
            await asyncio.wait(open_tasks, timeout=self.timeout + 5)

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=self.timeout + 10)

    def snapshot(self):
        with self.lock:
            return list(self.results)
