#!/usr/bin/env python3
"""A tiny but real OpenAI-compatible inference server for CPU serving campaigns.

A small decoder-only transformer (random weights from a fixed seed, so every instance with the
same dtype produces the same greedy tokens) behind an asyncio HTTP/1.1 server speaking
``/v1/completions`` and ``/v1/chat/completions`` — streaming (SSE, with ``usage`` when
``stream_options.include_usage`` is set) and not, with ``logprobs`` — plus ``/health``,
``/v1/models`` and a Prometheus ``/metrics`` page (queue depth, running requests, KV usage).

The engine is what vLLM does, in miniature: continuous batching over a slot-based KV cache,
admission bounded by ``--max-batch-size`` and a KV-token budget, chunked prefill bounded by
``--max-prefill-tokens`` per step, then one batched decode step for every running sequence. So
the knobs trade off the way real serving knobs do: bigger batches buy throughput with per-token
latency, prefill budget trades TTFT against TPOT, more threads help only if cores are free,
bfloat16 changes the outputs. Standalone: the standard library and torch only.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import signal
import sys
import threading
import time
import uuid
import zlib
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F

EOS = 0


def _bool(text: str) -> bool:
    v = str(text).strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model-name", default="tiny-lm")
    p.add_argument("--max-batch-size", type=int, default=8, help="max running sequences (decode batch)")
    p.add_argument("--batch-wait-ms", type=float, default=0.0, help="when idle, wait this long to fill a batch")
    p.add_argument("--max-prefill-tokens", type=int, default=512, help="prompt tokens prefilled per engine step")
    p.add_argument("--kv-cache-tokens", type=int, default=16384, help="KV budget: admission control")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--compile", type=_bool, default=False, help="torch.compile the decode step")
    p.add_argument("--stream-interval", type=int, default=1, help="tokens per streamed event")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    for name in ("max_batch_size", "max_prefill_tokens", "kv_cache_tokens", "threads", "stream_interval"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.dim % a.heads:
        p.error("--dim must be a multiple of --heads")
    return a


# --- tokenizer: whitespace words hashed into the vocabulary ---------------------------------
class Tokenizer:
    _C, _V = "bcdfghjklmnprstvz", "aeiou"

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.words = ["</s>"] + [self._word(i) for i in range(1, vocab)]

    def _word(self, i: int) -> str:
        out = ""
        while True:
            out += self._C[i % len(self._C)] + self._V[(i // len(self._C)) % len(self._V)]
            i //= len(self._C) * len(self._V)
            if i == 0:
                return out

    def encode(self, text: str) -> list[int]:
        ids = [1 + zlib.crc32(w.encode()) % (self.vocab - 1) for w in text.split()]
        return ids or [1]

    def piece(self, tok: int) -> str:
        return "" if tok == EOS else " " + self.words[tok]


# --- model ----------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)


class TinyLM(nn.Module):
    """Pre-LN decoder. K/V live in ``[slots, heads, max_seq, head_dim]`` tensors per layer."""

    def __init__(self, a: argparse.Namespace, dtype: torch.dtype):
        super().__init__()
        torch.manual_seed(a.seed)
        self.h, self.hd, self.max_seq = a.heads, a.dim // a.heads, a.max_seq_len
        self.emb, self.pos = nn.Embedding(a.vocab, a.dim), nn.Embedding(a.max_seq_len, a.dim)
        self.blocks = nn.ModuleList(Block(a.dim) for _ in range(a.layers))
        self.ln_f, self.head = nn.LayerNorm(a.dim), nn.Linear(a.dim, a.vocab, bias=False)
        nn.init.normal_(self.head.weight, std=0.25)  # peaked next-token distributions, like a trained LM
        self.to(dtype).eval()
        shape = (a.max_batch_size, self.h, a.max_seq_len, self.hd)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in self.blocks]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in self.blocks]

    def _mlp(self, blk: Block, x: torch.Tensor) -> torch.Tensor:
        return x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))

    @torch.inference_mode()
    def prefill(self, slot: int, ids: list[int], start: int) -> torch.Tensor:
        n = len(ids)
        x = self.emb(torch.tensor(ids)) + self.pos(torch.arange(start, start + n))
        x = x[None]
        total = start + n
        mask = torch.arange(total)[None, :] <= (start + torch.arange(n))[:, None]
        for i, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(blk.ln1(x)).view(1, n, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
            self.k[i][slot, :, start:total] = k[0]
            self.v[i][slot, :, start:total] = v[0]
            keys, vals = self.k[i][slot:slot + 1, :, :total], self.v[i][slot:slot + 1, :, :total]
            a = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
            x = x + blk.proj(a.transpose(1, 2).reshape(1, n, -1))
            x = self._mlp(blk, x)
        return self.head(self.ln_f(x[:, -1])).float()[0]

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """One token for each of the first ``len(tokens)`` slots (free slots carry a dummy)."""
        with torch.inference_mode():
            return self._decode(tokens, positions)

    def _decode(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        b = tokens.shape[0]
        x = (self.emb(tokens) + self.pos(positions))[:, None]
        length = int(positions.max()) + 1
        mask = (torch.arange(length)[None, :] <= positions[:, None])[:, None, None, :]
        rows = torch.arange(b)
        for i, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(blk.ln1(x)).view(b, 1, 3, self.h, self.hd).permute(2, 0, 3, 1, 4)
            self.k[i][rows, :, positions] = k[:, :, 0]
            self.v[i][rows, :, positions] = v[:, :, 0]
            a = F.scaled_dot_product_attention(q, self.k[i][:b, :, :length], self.v[i][:b, :, :length],
                                               attn_mask=mask)
            x = x + blk.proj(a.transpose(1, 2).reshape(b, 1, -1))
            x = self._mlp(blk, x)
        return self.head(self.ln_f(x[:, 0])).float()


# --- engine ---------------------------------------------------------------------------------
class Seq:
    def __init__(self, ids, max_tokens, ignore_eos, temperature, logprobs, seed, deliver):
        self.ids, self.max_tokens, self.ignore_eos = ids, max_tokens, ignore_eos
        self.temperature, self.logprobs, self.deliver = temperature, logprobs, deliver
        self.gen: list[int] = []
        self.slot = -1
        self.filled = 0
        self.finish_reason: str | None = None
        self.cancelled = False
        self.need = len(ids) + max_tokens
        self.rng = torch.Generator().manual_seed(seed)


class Engine:
    def __init__(self, model: TinyLM, a: argparse.Namespace, loop: asyncio.AbstractEventLoop):
        self.m, self.a, self.loop = model, a, loop
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.free = list(range(a.max_batch_size))
        self.cv = threading.Condition()
        self.reserved = 0
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
        self.decode = model.decode
        if a.compile:
            self.decode = torch.compile(model._decode, dynamic=True)

    def submit(self, seq: Seq) -> None:
        with self.cv:
            self.waiting.append(seq)
            self.cv.notify()

    def run(self) -> None:
        while True:
            with self.cv:
                while not self.waiting and not self.running:
                    self.cv.wait()
                if not self.running and self.a.batch_wait_ms > 0:
                    end = time.monotonic() + self.a.batch_wait_ms / 1e3
                    while len(self.waiting) < self.a.max_batch_size and (left := end - time.monotonic()) > 0:
                        self.cv.wait(left)
                self._admit()
            try:
                self._step()
            except Exception as exc:  # never leave a client hanging on a dead engine
                print(f"engine error: {exc!r}", file=sys.stderr, flush=True)
                for s in self.running:
                    s.finish_reason = "error"
                    self._free(s)
                self._emit([(s, None, None, None) for s in self.running])
                self.running = []

    def _admit(self) -> None:
        while self.waiting and self.free:
            seq = self.waiting[0]
            if seq.cancelled:
                self.waiting.popleft()
                continue
            if self.running and self.reserved + seq.need > self.a.kv_cache_tokens:
                break
            self.waiting.popleft()
            seq.slot = heapq.heappop(self.free)
            self.reserved += seq.need
            self.running.append(seq)

    def _free(self, s: Seq) -> None:
        heapq.heappush(self.free, s.slot)
        self.reserved -= s.need

    def _sample(self, s: Seq, logits: torch.Tensor):
        if s.temperature <= 0:
            tok = int(torch.argmax(logits))
        else:
            probs = torch.softmax(logits / s.temperature, dim=-1)
            tok = int(torch.multinomial(probs, 1, generator=s.rng))
        lp = top = None
        if s.logprobs is not None:
            logp = torch.log_softmax(logits, dim=-1)
            lp = float(logp[tok])
            vals, idx = torch.topk(logp, max(1, s.logprobs))
            top = [(int(i), float(v)) for v, i in zip(vals, idx)]
        return tok, lp, top

    def _step(self) -> None:
        out = []
        for s in [s for s in self.running if s.cancelled]:  # the client went away
            self._free(s)
        self.running = [s for s in self.running if not s.cancelled]
        budget = self.a.max_prefill_tokens
        fresh = set()
        for s in self.running:
            if s.filled >= len(s.ids):
                continue
            if budget <= 0:
                break
            n = min(len(s.ids) - s.filled, budget)
            logits = self.m.prefill(s.slot, s.ids[s.filled:s.filled + n], s.filled)
            s.filled += n
            budget -= n
            self.counters["prompt_tokens"] += n
            if s.filled == len(s.ids):
                tok, lp, top = self._sample(s, logits)
                s.gen.append(tok)
                fresh.add(id(s))
                out.append((s, tok, lp, top))
        dec = [s for s in self.running if s.filled >= len(s.ids) and s.gen and id(s) not in fresh
               and len(s.gen) < s.max_tokens]
        if dec:
            b = max(s.slot for s in dec) + 1
            toks = torch.zeros(b, dtype=torch.long)
            pos = torch.zeros(b, dtype=torch.long)
            for s in dec:
                toks[s.slot], pos[s.slot] = s.gen[-1], s.filled
            logits = self.decode(toks, pos)
            for s in dec:
                s.filled += 1
                tok, lp, top = self._sample(s, logits[s.slot])
                s.gen.append(tok)
                out.append((s, tok, lp, top))
        self.counters["generation_tokens"] += len(out)
        keep = []
        for s in self.running:
            if len(s.gen) >= s.max_tokens:
                s.finish_reason = "length"
            elif s.gen and s.gen[-1] == EOS and not s.ignore_eos:
                s.finish_reason = "stop"
            if s.finish_reason:
                self._free(s)
                self.counters["requests"] += 1
                out.append((s, None, None, None))
            else:
                keep.append(s)
        self.running = keep
        self._emit(out)

    def _emit(self, items) -> None:
        if items:
            self.loop.call_soon_threadsafe(_deliver, items)


def _deliver(items) -> None:
    for s, tok, lp, top in items:
        if not s.cancelled:
            s.deliver((tok, lp, top))


# --- HTTP -----------------------------------------------------------------------------------
class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


class Server:
    def __init__(self, a: argparse.Namespace, engine: Engine, tok: Tokenizer):
        self.a, self.engine, self.tok = a, engine, tok

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                parts = line.decode("latin-1").split()
                if len(parts) < 2:
                    break
                method, path = parts[0], parts[1].split("?", 1)[0]
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                try:
                    await self.route(method, path, body, writer)
                except HttpError as e:
                    await self.send_json(writer, e.status, {"error": {"message": str(e), "type": "invalid_request_error"}})
                if headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def send(self, writer, status: int, ctype: str, data: bytes) -> None:
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        await writer.drain()

    async def send_json(self, writer, status: int, obj) -> None:
        await self.send(writer, status, "application/json", json.dumps(obj).encode())

    async def route(self, method: str, path: str, body: bytes, writer) -> None:
        if path == "/health":
            return await self.send(writer, 200, "text/plain", b"ok")
        if path == "/v1/models":
            return await self.send_json(writer, 200, {"object": "list", "data": [
                {"id": self.a.model_name, "object": "model", "owned_by": "arbor"}]})
        if path == "/metrics":
            return await self.send(writer, 200, "text/plain; version=0.0.4", self.metrics().encode())
        if path in ("/v1/completions", "/v1/chat/completions"):
            if method != "POST":
                raise HttpError(405, "use POST")
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                raise HttpError(400, "body is not valid JSON") from None
            if not isinstance(req, dict):
                raise HttpError(400, "body must be a JSON object")
            return await self.generate(req, path.endswith("chat/completions"), writer)
        raise HttpError(404, f"no route {path}")

    def metrics(self) -> str:
        e, lab = self.engine, f'{{model_name="{self.a.model_name}"}}'
        rows = [("num_requests_running", "gauge", len(e.running)),
                ("num_requests_waiting", "gauge", len(e.waiting)),
                ("kv_cache_usage_perc", "gauge", e.reserved / self.a.kv_cache_tokens),
                ("num_preemptions_total", "counter", 0),
                ("prompt_tokens_total", "counter", e.counters["prompt_tokens"]),
                ("generation_tokens_total", "counter", e.counters["generation_tokens"]),
                ("request_success_total", "counter", e.counters["requests"])]
        return "".join(f"# TYPE tiny:{n} {t}\ntiny:{n}{lab} {v}\n" for n, t, v in rows)

    def _prompt_ids(self, req: dict, chat: bool) -> list[int]:
        if chat:
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise HttpError(400, "messages must be a non-empty list")
            text = " ".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in msgs if isinstance(m, dict))
            return self.tok.encode(text)
        prompt = req.get("prompt")
        if isinstance(prompt, str):
            return self.tok.encode(prompt)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            if not all(0 <= t < self.a.vocab for t in prompt):
                raise HttpError(400, f"token ids must be in [0, {self.a.vocab})")
            return list(prompt)
        raise HttpError(400, "prompt must be a string or a list of token ids")

    async def generate(self, req: dict, chat: bool, writer) -> None:
        ids = self._prompt_ids(req, chat)
        try:
            max_tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            temperature = float(req.get("temperature", 1.0))
        except (TypeError, ValueError):
            raise HttpError(400, "max_tokens and temperature must be numbers") from None
        if max_tokens < 1:
            raise HttpError(400, "max_tokens must be >= 1")
        if len(ids) + max_tokens > self.a.max_seq_len:
            raise HttpError(400, f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the "
                                 f"context of {self.a.max_seq_len} tokens")
        if len(ids) + max_tokens > self.a.kv_cache_tokens:
            raise HttpError(400, "request does not fit in the KV cache")
        lp = req.get("logprobs")
        logprobs = (int(req.get("top_logprobs") or 1) if lp else None) if chat else (int(lp) if lp else None)
        queue: asyncio.Queue = asyncio.Queue()
        seq = Seq(ids, max_tokens, bool(req.get("ignore_eos", False)), temperature, logprobs,
                  int(req.get("seed") or 0), queue.put_nowait)
        self.engine.submit(seq)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        try:
            if req.get("stream"):
                usage = bool((req.get("stream_options") or {}).get("include_usage"))
                await self.stream(seq, queue, chat, rid, usage, writer)
            else:
                await self.whole(seq, queue, chat, rid, writer)
        except (ConnectionError, asyncio.CancelledError):
            seq.cancelled = True
            raise

    def _usage(self, seq: Seq) -> dict:
        return {"prompt_tokens": len(seq.ids), "completion_tokens": len(seq.gen),
                "total_tokens": len(seq.ids) + len(seq.gen)}

    def _logprobs(self, items, chat: bool):
        if chat:
            return {"content": [{"token": self.tok.piece(t), "logprob": lp,
                                 "top_logprobs": [{"token": self.tok.piece(i), "logprob": v} for i, v in top]}
                                for t, lp, top in items]}
        return {"tokens": [self.tok.piece(t) for t, _, _ in items], "token_logprobs": [lp for _, lp, _ in items],
                "top_logprobs": [{self.tok.piece(i): v for i, v in top} for _, _, top in items]}

    def _choice(self, items, chat: bool, finish, with_lp: bool, delta: bool) -> dict:
        text = "".join(self.tok.piece(t) for t, _, _ in items)
        c: dict = {"index": 0, "finish_reason": finish, "logprobs": self._logprobs(items, chat) if with_lp else None}
        if chat:
            c["delta" if delta else "message"] = {"role": "assistant", "content": text}
        else:
            c["text"] = text
        return c

    async def stream(self, seq: Seq, queue: asyncio.Queue, chat: bool, rid: str, usage: bool, writer) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())
        with_lp = seq.logprobs is not None

        async def event(payload) -> None:
            data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()

        def chunk(choices, extra=None) -> dict:
            d = {"id": rid, "object": obj, "created": created, "model": self.a.model_name, "choices": choices}
            d.update(extra or {})
            return d

        pending = []
        while True:
            tok, lp, top = await queue.get()
            if tok is not None:
                pending.append((tok, lp, top))
            if pending and (tok is None or len(pending) >= self.a.stream_interval):
                await event(chunk([self._choice(pending, chat, None, with_lp, True)]))
                pending = []
            if tok is None:
                break
        if seq.finish_reason == "error":
            await event({"error": {"message": "engine error", "type": "server_error"}})
        else:
            fin = self._choice([], chat, seq.finish_reason, False, True)
            if chat:
                fin["delta"] = {}
            await event(chunk([fin]))
            if usage:
                await event(chunk([], {"usage": self._usage(seq)}))
        await event(b"[DONE]")
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def whole(self, seq: Seq, queue: asyncio.Queue, chat: bool, rid: str, writer) -> None:
        items = []
        while True:
            tok, lp, top = await queue.get()
            if tok is None:
                break
            items.append((tok, lp, top))
        if seq.finish_reason == "error":
            raise HttpError(500, "engine error")
        choice = self._choice(items, chat, seq.finish_reason, seq.logprobs is not None, False)
        await self.send_json(writer, 200, {
            "id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
            "model": self.a.model_name, "choices": [choice], "usage": self._usage(seq)})


def warm_up(model: TinyLM, engine: Engine, a: argparse.Namespace) -> None:
    """Touch every code path once (and trigger torch.compile) before reporting healthy."""
    model.prefill(0, [1] * 16, 0)
    for b in sorted({1, min(2, a.max_batch_size), a.max_batch_size}):
        engine.decode(torch.ones(b, dtype=torch.long), torch.arange(1, b + 1, dtype=torch.long) % 16)


async def main_async(a: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    dtype = torch.bfloat16 if a.dtype == "bfloat16" else torch.float32
    model = TinyLM(a, dtype)
    engine = Engine(model, a, loop)
    warm_up(model, engine, a)
    threading.Thread(target=engine.run, name="engine", daemon=True).start()
    server = Server(a, engine, Tokenizer(a.vocab))
    srv = await asyncio.start_server(server.handle, a.host, a.port, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"tiny-lm ready on http://{a.host}:{a.port} (batch {a.max_batch_size}, {a.threads} thread(s), "
          f"{a.dtype}, compile={a.compile})", flush=True)
    async with srv:
        await stop.wait()


def main(argv=None) -> None:
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    asyncio.run(main_async(a))


if __name__ == "__main__":
    main()
