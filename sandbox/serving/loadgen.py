"""The asyncio load generator: drive one server at one load level and measure it.

A *level* is either a fixed **concurrency** (N requests always in flight — closed loop, the
``--max-concurrency`` of vLLM's benchmark) or a **request rate** (Poisson arrivals from a seeded
generator — open loop, optionally capped by ``max_concurrency``). A level sends ``num_prompts``
requests, or keeps sending for ``duration_s`` (requests in flight at the deadline still finish
and count). Warm-up requests are sent before the timed region and never counted.

httpx is the HTTP client (already a dependency of the openai SDK): its ``AsyncClient.stream``
hands over lines as bytes arrive, which is what token timing needs, and one client with a
connection pool sized to the concurrency avoids measuring TCP handshakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field

import httpx

from .client import RequestResult, build_body, stream_request
from .metrics import Slo, aggregate, parse_prometheus, server_signals, summarize_scrapes
from .workload import RequestSpec


@dataclass(frozen=True)
class Level:
    concurrency: int | None = None
    rate: float | None = None  # requests per second (Poisson)
    max_concurrency: int | None = None  # cap for rate levels

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a load level has exactly one of concurrency or rate")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be > 0")

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" if self.concurrency is not None else f"rate={self.rate:g}/s"

    def to_dict(self) -> dict:
        return {"concurrency": self.concurrency, "rate": self.rate, "max_concurrency": self.max_concurrency,
                "label": self.label}


@dataclass
class LoadConfig:
    """Everything about *how* requests are sent (the what is the list of RequestSpec)."""

    api: str = "completions"
    model: str = "model"
    num_prompts: int | None = 64
    duration_s: float | None = None
    warmup_requests: int = 0
    request_timeout_s: float = 60.0
    temperature: float = 0.0
    ignore_eos: bool = True
    extra_body: dict = field(default_factory=dict)
    slo: Slo = field(default_factory=Slo)
    metrics_path: str | None = None
    scrape_interval_s: float = 0.25
    seed: int = 0


def make_client(max_connections: int) -> httpx.AsyncClient:
    # trust_env=False: a proxy from the environment must never sit between us and 127.0.0.1
    limits = httpx.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections + 4)
    return httpx.AsyncClient(limits=limits, trust_env=False, timeout=httpx.Timeout(60.0))


class _Feed:
    """Hands out requests in order, cycling the list; stops at num_prompts or the deadline."""

    def __init__(self, requests: list[RequestSpec], limit: int | None, deadline: float | None):
        if not requests:
            raise ValueError("no requests to send")
        self.requests, self.limit, self.deadline, self.i = requests, limit, deadline, 0

    def next(self) -> RequestSpec | None:
        if self.limit is not None and self.i >= self.limit:
            return None
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return None
        r = self.requests[self.i % len(self.requests)]
        self.i += 1
        return r


async def _send(client: httpx.AsyncClient, base_url: str, cfg: LoadConfig, req: RequestSpec) -> RequestResult:
    body = build_body(req, cfg.api, cfg.model, temperature=cfg.temperature, ignore_eos=cfg.ignore_eos,
                      extra=cfg.extra_body)
    return await stream_request(client, base_url, cfg.api, body, cfg.request_timeout_s)


async def warm_up(client: httpx.AsyncClient, base_url: str, cfg: LoadConfig, requests: list[RequestSpec],
                  n: int, concurrency: int = 1) -> list[RequestResult]:
    """Send ``n`` untimed requests (from the end of the list, so they differ from the timed ones)."""
    if n <= 0:
        return []
    picks = [requests[-1 - (i % len(requests))] for i in range(n)]
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(r: RequestSpec) -> RequestResult:
        async with sem:
            return await _send(client, base_url, cfg, r)

    return list(await asyncio.gather(*(one(r) for r in picks)))


async def _scrape_loop(client: httpx.AsyncClient, url: str, interval: float, out: list[dict]) -> None:
    while True:
        try:
            resp = await client.get(url, timeout=2.0)
            if resp.status_code == 200:
                sig = server_signals(parse_prometheus(resp.text))
                if sig:
                    out.append(sig)
        except httpx.HTTPError:
            pass
        await asyncio.sleep(interval)


async def run_level(client: httpx.AsyncClient, base_url: str, cfg: LoadConfig, requests: list[RequestSpec],
                    level: Level) -> dict:
    """Run one level; returns the aggregated metrics plus the server's signals while it ran."""
    start = time.perf_counter()
    deadline = start + cfg.duration_s if cfg.duration_s else None
    feed = _Feed(requests, None if deadline else cfg.num_prompts, deadline)
    results: list[RequestResult] = []
    scrapes: list[dict] = []
    scraper = None
    if cfg.metrics_path:
        url = base_url.rstrip("/") + cfg.metrics_path
        scraper = asyncio.ensure_future(_scrape_loop(client, url, cfg.scrape_interval_s, scrapes))
    try:
        if level.concurrency is not None:
            await _closed_loop(client, base_url, cfg, feed, level.concurrency, results)
        else:
            await _open_loop(client, base_url, cfg, feed, level, results)
    finally:
        if scraper is not None:
            scraper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await scraper
    duration = time.perf_counter() - start
    out = aggregate(results, duration, cfg.slo)
    out["level"] = level.to_dict()
    out["server"] = summarize_scrapes(scrapes)
    return out


async def _closed_loop(client, base_url, cfg, feed: _Feed, concurrency: int, results: list) -> None:
    async def worker() -> None:
        while (req := feed.next()) is not None:
            results.append(await _send(client, base_url, cfg, req))

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _open_loop(client, base_url, cfg, feed: _Feed, level: Level, results: list) -> None:
    rng = random.Random(f"{cfg.seed}:{level.rate}")
    sem = asyncio.Semaphore(level.max_concurrency) if level.max_concurrency else None
    tasks = []

    async def one(req: RequestSpec) -> None:
        if sem is None:
            results.append(await _send(client, base_url, cfg, req))
            return
        async with sem:
            results.append(await _send(client, base_url, cfg, req))

    t0 = time.perf_counter()
    next_at = t0
    while (req := feed.next()) is not None:
        delay = next_at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(req)))
        next_at += rng.expovariate(level.rate)
        if feed.deadline is not None and next_at >= feed.deadline:
            break
    if tasks:
        await asyncio.gather(*tasks)
