"""Continuous batching over the model's KV slots: admission bounded by the batch size and a
KV-token budget, chunked prefill bounded per step, then one batched decode step for every running
sequence — what vLLM's scheduler does, in miniature. Runs on its own thread; results reach the
asyncio loop through ``call_soon_threadsafe``."""

from __future__ import annotations

import argparse
import asyncio
import heapq
import sys
import threading
import time
from collections import deque

import torch

from .model import EOS, TinyLM


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
