"""Serving measurement protocol: baseline vs candidate server, interleaved repeats, accuracy probe.

One measurement runs ``repeats`` *rounds*; each round drives every load level on both servers,
the order alternating A B | B A | A B … so drift (thermal, a neighbour's job) hits both sides
alike. Two ways to host the two servers:

* ``concurrent`` — both are up for the whole measurement and take turns (cheap: two start-ups;
  right for CPU servers and for GPUs with room for two instances);
* ``sequential`` — one server at a time, restarted for each run of consecutive same-side turns
  (A | B B | A A | B …: ``repeats + 1`` start-ups): right for a GPU that fits one server only.

When output-changing knobs differ, an accuracy probe sends fixed greedy prompts with
log-probabilities to both servers (one request at a time, so batching cannot perturb them); the
Critic compares the two. The result is a plain dict; every way this can end — a start-up crash,
OOM, a hang, a server dying mid-run, Ctrl-C — stops both servers first.
"""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from .client import build_body, complete_with_logprobs
from .leases import cleanup_stale
from .lifecycle import ServerConfig, ServerProcess, ServerStartError, diagnose, start_servers, stop_all
from .loadgen import Level, LoadConfig, make_client, run_level, warm_up
from .workload import RequestSpec

SIDES = ("baseline", "candidate")


@dataclass
class AccuracyProbe:
    requests: list[RequestSpec]
    logprobs: int = 1
    knobs: dict = field(default_factory=dict)  # the output-changing knobs under test, named in a verdict


@dataclass
class ServingRequest:
    baseline: ServerConfig
    candidate: ServerConfig
    load: LoadConfig
    requests: list[RequestSpec]
    levels: list[Level]
    repeats: int = 3
    server_mode: str = "concurrent"
    accuracy: AccuracyProbe | None = None
    timeout_s: float = 900.0
    lease_dir: Path | None = None
    warmup_concurrency: int = 4


@dataclass
class _Run:
    req: ServingRequest
    deadline: float
    rounds: list[dict] = field(default_factory=list)
    startups: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SIDES})
    accuracy: dict[str, list[dict]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class _Failure(Exception):
    def __init__(self, error_class: str, text: str):
        super().__init__(text)
        self.error_class = error_class

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.error_class, str(self)))


Turn = tuple[int, str, tuple[int, ...]]  # (round, side, load-level indexes)


def turn_order(repeats: int, n_levels: int, per_level: bool) -> list[Turn]:
    """Execution order. ``per_level`` (both servers up): every load level runs on A and B back to
    back, A B | B A alternating over rounds *and* levels, so a burst of background load lasting a
    second or two lands on both sides of one comparison. Otherwise (one server at a time) a turn
    runs all levels: A B | B A | A B ..."""
    out: list[Turn] = []
    for r in range(repeats):
        if per_level:
            for lv in range(n_levels):
                pair = SIDES if (r + lv) % 2 == 0 else SIDES[::-1]
                out.extend((r, side, (lv,)) for side in pair)
        else:
            pair = SIDES if r % 2 == 0 else SIDES[::-1]
            out.extend((r, side, tuple(range(n_levels))) for side in pair)
    return out


def _fingerprint() -> dict:
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    from ..runners.host_facts import host_fingerprint

    # the host's facts as a kernel measurement records them (cpu model, governor, 1-min load), so
    # the dashboard's environment panel reads the same keys for both kinds
    return {**host_fingerprint(), "device": "server (cpu host)", "platform": platform.platform(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "loadavg": load}


def measure_serving(req: ServingRequest) -> dict:
    """Run the whole protocol; returns the dict stored as one measurement. Never raises for a
    bad candidate (failures are data); re-raises KeyboardInterrupt after stopping the servers."""
    t0 = time.monotonic()
    run = _Run(req, deadline=t0 + req.timeout_s)
    servers: list[ServerProcess] = []
    status, error_class, error_text = "ok", None, None
    killed = cleanup_stale(req.lease_dir)
    if killed:
        run.warnings.append(f"stopped {len(killed)} server process(es) left by a dead run: {killed}")
    try:
        if req.server_mode == "concurrent":
            _concurrent(run, servers)
        elif req.server_mode == "sequential":
            _sequential(run, servers)
        else:
            raise ValueError(f"unknown server_mode {req.server_mode!r}: use concurrent or sequential")
    except ServerStartError as err:
        status, error_class = "failed", err.error_class
        error_text = f"{err}\n--- server log (tail) ---\n{err.log_tail[-2000:]}"
    except _Failure as err:
        status, error_class, error_text = "failed", err.error_class, str(err)
    except (asyncio.TimeoutError, TimeoutError):
        status, error_class = "failed", "timeout"
        error_text = f"measurement exceeded its {req.timeout_s:g} s limit"
    except Exception as exc:  # a bug on our side must not take the campaign down
        import traceback

        status, error_class = "failed", "harness_error"
        error_text = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"
    finally:
        stop_all(servers)
    raw = {
        "rounds": run.rounds,
        "levels": [lv.to_dict() for lv in req.levels],
        "order": [f"{r}:{side}:{','.join(map(str, lvs))}"
                  for r, side, lvs in turn_order(req.repeats, len(req.levels), req.server_mode == "concurrent")],
        "server_mode": req.server_mode,
        "startup_s": run.startups,
        "accuracy": ({**run.accuracy, "knobs": dict(req.accuracy.knobs)}
                     if run.accuracy and req.accuracy is not None else None),
        "warnings": run.warnings,
        "symptoms": _symptoms(run.rounds),
    }
    return {
        "status": status, "error_class": error_class, "error_text": error_text,
        "baseline_samples": [], "candidate_samples": [], "correctness": [],
        "stats": {"serving": raw}, "fingerprint": _fingerprint(),
        "duration_s": time.monotonic() - t0,
    }


def _remaining(run: _Run) -> float:
    left = run.deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _start(run: _Run, cfgs: list[ServerConfig], servers: list[ServerProcess]) -> list[ServerProcess]:
    started = start_servers(cfgs, servers)
    for cfg, s in zip(cfgs, started):
        run.startups[_side_of(run, cfg)].append(round(s.startup_s or 0.0, 3))
    return started


def _side_of(run: _Run, cfg: ServerConfig) -> str:
    return "baseline" if cfg is run.req.baseline else "candidate"


def _concurrent(run: _Run, servers: list[ServerProcess]) -> None:
    req = run.req
    base, cand = _start(run, [req.baseline, req.candidate], servers)
    by_side = {"baseline": base, "candidate": cand}
    asyncio.run(_drive(run, by_side, turn_order(req.repeats, len(req.levels), True), warm=set(SIDES)))


def _sequential(run: _Run, servers: list[ServerProcess]) -> None:
    req = run.req
    order = turn_order(req.repeats, len(req.levels), False)
    groups: list[list[Turn]] = []
    for turn in order:
        if groups and groups[-1][0][1] == turn[1]:
            groups[-1].append(turn)
        else:
            groups.append([turn])
    for group in groups:
        side = group[0][1]
        cfg = req.baseline if side == "baseline" else req.candidate
        (server,) = _start(run, [cfg], servers)
        try:
            asyncio.run(_drive(run, {side: server}, group, warm={side}))
        finally:
            server.stop()


async def _drive(run: _Run, by_side: dict[str, ServerProcess], turns: list[Turn],
                 warm: set[str]) -> None:
    req = run.req
    conc = max([lv.concurrency or lv.max_concurrency or req.warmup_concurrency for lv in req.levels] + [1])
    async with make_client(conc) as client:
        for side in sorted(warm):
            s = by_side[side]
            results = await asyncio.wait_for(
                warm_up(client, s.base_url, req.load, req.requests, req.load.warmup_requests,
                        req.warmup_concurrency), _remaining(run))
            bad = [r for r in results if not r.ok]
            _check_alive(s, side)
            if bad and len(bad) == len(results):
                raise _Failure("runtime_error", f"{side} server failed every warm-up request: {bad[0].error}")
            if req.accuracy is not None and side not in run.accuracy:
                run.accuracy[side] = await asyncio.wait_for(_probe(client, s, req), _remaining(run))
        for r, side, level_ids in turns:
            while len(run.rounds) <= r:
                run.rounds.append({"baseline": [], "candidate": []})
            s = by_side[side]
            for i in level_ids:
                lv = req.levels[i]
                res = await asyncio.wait_for(run_level(client, s.base_url, req.load, req.requests, lv),
                                             _remaining(run))
                _check_alive(s, side)
                run.rounds[r][side].append(res)
                _check_output_lengths(run, side, res)


def _check_alive(s: ServerProcess, side: str) -> None:
    rc = s.exited()
    if rc is None:
        return
    log = s.log_tail()
    cls = diagnose(rc, log)
    raise _Failure("oom" if cls == "oom" else "runtime_error",
                   f"{side} server died during the load run (status {rc})\n--- server log (tail) ---\n{log[-2000:]}")


def _check_output_lengths(run: _Run, side: str, res: dict) -> None:
    ratio = res.get("out_len_ratio")
    if ratio is not None and ratio < 0.9:
        msg = (f"{side} produced {ratio:.0%} of the requested output tokens at {res['level']['label']}: "
               "the server ignores max_tokens/ignore_eos, so lengths differ from the profile")
        if msg not in run.warnings:
            run.warnings.append(msg)


async def _probe(client, server: ServerProcess, req: ServingRequest) -> list[dict]:
    out = []
    assert req.accuracy is not None
    for spec in req.accuracy.requests:
        body = build_body(spec, req.load.api, req.load.model, stream=False, temperature=0.0,
                          ignore_eos=True, logprobs=req.accuracy.logprobs)
        c = await complete_with_logprobs(client, server.base_url, req.load.api, body, req.load.request_timeout_s)
        out.append(c.to_dict())
    return out


def _symptoms(rounds: list[dict]) -> dict:
    """What the specialist's ``when:`` conditions read: per side, the highest load level of the
    last complete round (the most stressed point), plus the server's own signals there."""
    out: dict[str, dict] = {}
    for side in SIDES:
        levels = next((rd[side] for rd in reversed(rounds) if rd.get(side)), None)
        if not levels:
            continue
        top = levels[-1]
        sym = {
            "req_s": top["req_s"], "tok_s": top["out_tok_s"], "goodput_req_s": top["goodput_req_s"],
            "failed": float(sum(lv["failed"] for lv in levels)),
            "slo_attainment": top["slo_attainment"],
            "concurrency": float(top["level"]["concurrency"] or top["level"]["max_concurrency"] or 0),
        }
        for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            for q in ("p50", "p90", "p95", "p99"):
                v = top[metric].get(q)
                if v is not None:
                    sym[f"{metric[:-3]}_{q}_ms"] = v
        t, e = top["ttft_ms"].get("p50"), top["e2e_ms"].get("p50")
        if t is not None and e:
            sym["ttft_share"] = t / e
        if top.get("out_len_ratio") is not None:
            sym["out_len_ratio"] = top["out_len_ratio"]
        sym.update({k: v for k, v in top.get("server", {}).items() if k != "scrapes"})
        out[side] = sym
    return out
