"""``arbor record``: measure every point of a target's knob space into a landscape file.

The knob space is what the campaign's skills declare: every ``const_set``/``const_step`` move
names a module-level constant of the kernel template and the values it may take, the template's
current value is the default, and the space is the product of the knobs' values — the same set
of configurations the heuristic specialist can reach by chaining those moves. Each point's source
is built by those transforms from the baseline source, then measured by the campaign's real
adapter and runner (the sandboxed harness, correctness included), ``repeats`` times.

Repeats are taken in passes over all points, each pass in a fresh random order, so slow drift of a
shared machine spreads over the landscape instead of biasing whichever points came last. The file
is rewritten after every pass, so an interrupted recording keeps its finished passes.
"""

from __future__ import annotations

import itertools
import os
import platform
import random
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from arbor.agents.skills import MoveSpec
from arbor.agents.transforms import apply_move
from arbor.agents.transforms.template import knob_values
from arbor.sandbox.kernel.problem import ProblemError
from arbor.spec_runners import runner_for
from arbor.spec import CampaignSpec

from . import make_adapter
from .landscape import Knob, Landscape, MoveDecl, Point, compact_run

KNOB_TRANSFORMS = ("const_set", "const_step")


class RecordError(ProblemError):
    """The campaign has no recordable knob space; one line saying what to add."""


@dataclass
class Space:
    knobs: list[Knob]
    moves: list[MoveSpec]


def _numeric(values: list) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _add(values: list, v: object) -> None:
    if not any(type(x) is type(v) and x == v for x in values):
        values.append(v)


def knob_space(root_source: str, moves: list[MoveSpec], where: str) -> Space:
    """Knobs (values in order, default from the template) declared by the template moves that
    apply to this source."""
    present = knob_values(root_source)
    domains: dict[str, list] = {}
    ordered: set[str] = set()
    used = []
    for m in moves:
        if m.transform not in KNOB_TRANSFORMS or m.params.get("name") not in present:
            continue
        name = m.params["name"]
        vals = domains.setdefault(name, [])
        if m.transform == "const_step":
            ordered.add(name)
            for v in m.params["values"]:
                _add(vals, v)
        else:
            _add(vals, m.params["value"])
        used.append(m)
    if not domains:
        raise RecordError(f"{where}: no skill move sets a module-level constant of this problem — "
                          "declare const_set/const_step moves (see campaigns/skills/tiled-matmul.md) "
                          "and list their folder in skills.extra_dirs")
    knobs = []
    for name, vals in domains.items():
        _add(vals, present[name])
        if name not in ordered and _numeric(vals):
            vals.sort()
        knobs.append(Knob(name=name, values=vals, default=present[name]))
    return Space(knobs, used)


def point_source(root_source: str, config: dict) -> str:
    src = root_source
    for name, value in config.items():
        src = apply_move(src, "const_set", {"name": name, "value": value}) or src
    return src


def _load() -> float | None:
    """1-minute load average: a shared machine's recordings say how shared it was."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _machine(spec: CampaignSpec) -> dict:
    import torch

    t = spec.target
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"host": socket.gethostname(), "platform": platform.platform(), "cpu": cpu,
            "python": platform.python_version(), "torch": torch.__version__, "device": t.device,
            "num_threads": t.num_threads, "cores": os.cpu_count(), "load_avg_at_start": _load()}


def wait_for_quiet(max_load: float | None, max_wait_s: float, progress: Callable[[str], None]) -> float:
    """On a shared machine, hold the next measurement while the 1-minute load average is above
    ``max_load`` (at most ``max_wait_s``); returns the seconds waited."""
    if max_load is None:
        return 0.0
    t0 = time.monotonic()
    while (_load() or 0.0) > max_load and time.monotonic() - t0 < max_wait_s:
        time.sleep(2.0)
    waited = time.monotonic() - t0
    if waited > 2.0:
        progress(f"  waited {waited:.0f} s for the load average to drop to {max_load} (now {_load()})")
    return waited


def _space_of(spec: CampaignSpec) -> tuple[object, str, Space]:
    if spec.target.kind != "kernel":
        raise RecordError(f"arbor record measures kernel templates; target.kind is {spec.target.kind!r} "
                          "(serving landscapes: record the knob grid with the serving runner)")
    adapter = make_adapter(spec)
    adapter.validate()
    root = adapter.root_source()
    return adapter, root, knob_space(root, adapter.moves(spec.load_skills()), str(spec.problem_path()))


def _move_decls(space: Space) -> list[MoveDecl]:
    return [MoveDecl(id=m.id, transform=m.transform, params=m.params, prior=m.prior, family=m.family,
                     description=m.description) for m in space.moves]


def refresh_policy(spec: CampaignSpec, path: Path) -> Landscape:
    """Replace a recorded landscape's campaign policy — the moves (ids, priors, families) its skills
    declare and the Critic's settings — by what the campaign says now. Neither changes what was
    measured, so as long as the knob space is unchanged nothing needs re-measuring."""
    from .landscape import load_landscape

    ls = load_landscape(path)
    _, _, space = _space_of(spec)
    if [k.model_dump() for k in space.knobs] != [k.model_dump() for k in ls.knobs]:
        raise RecordError(f"{path}: the campaign's knob space changed since it was recorded "
                          f"({[k.name for k in space.knobs]}) — record it again")
    ls.moves = _move_decls(space)
    ls.campaign["critic"] = spec.critic.model_dump()
    ls.recorded["policy_refreshed"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    ls.dump(path)
    return ls


def record(spec: CampaignSpec, repeats: int, out: Path, name: str | None = None, seed: int = 0,
           progress: Callable[[str], None] = print, limit: int | None = None,
           max_load: float | None = None, max_wait_s: float = 120.0) -> Landscape:
    """Measure every point ``repeats`` times; writes ``out`` after each pass and returns the landscape."""
    adapter, root, space = _space_of(spec)
    names = [k.name for k in space.knobs]
    configs = [dict(zip(names, vals)) for vals in itertools.product(*(k.values for k in space.knobs))]
    if limit is not None:
        configs = configs[:limit]
    sources = [point_source(root, c) for c in configs]
    points = [Point(knobs=c) for c in configs]
    ls = Landscape(
        name=name or out.stem, kind="kernel", description=spec.description or spec.name,
        knobs=space.knobs, points=points,
        moves=_move_decls(space),
        recorded={"machine": _machine(spec), "repeats": repeats, "problem": spec.problem_path().name,
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seed": seed,
                  "complete": False},
        campaign={"measurement": spec.measurement.model_dump(), "critic": spec.critic.model_dump(),
                  "target": spec.target.model_dump(mode="json")},
    )
    runner = runner_for(spec, guarded=False)
    rng = random.Random(seed)
    total, done, t0, waited = len(points) * repeats, 0, time.monotonic(), 0.0
    progress(f"recording {len(points)} points x {repeats} repeats of {spec.problem_path().name} "
             f"(knobs: {', '.join(f'{k.name}={k.values}' for k in space.knobs)})")
    try:
        for rep in range(repeats):
            order = list(range(len(points)))
            rng.shuffle(order)
            for i in order:
                p = points[i]
                if p.status == "error":  # a point that failed once is not measured again
                    done += 1
                    continue
                waited += wait_for_quiet(max_load, max_wait_s, progress)
                t = time.monotonic()
                m = adapter.measure(runner, sources[i])
                if m.get("status") == "ok":
                    p.runs.append(compact_run(m["baseline_samples"], m["candidate_samples"], time.monotonic() - t))
                else:
                    p.status, p.error_class = "error", m.get("error_class") or "runtime_error"
                    p.error_text = (m.get("error_text") or "")[-500:]
                    p.runs = []
                done += 1
                eta = (time.monotonic() - t0) / done * (total - done)
                what = f"{p.speedup:.3f}x" if p.status == "ok" and p.speedup else p.error_class
                progress(f"[{done}/{total}] pass {rep + 1} {p.knobs}: {what} (eta {eta:.0f} s)")
            ls.recorded.setdefault("load_avg_per_pass", []).append(_load())
            ls.recorded.update(passes=rep + 1, duration_s=round(time.monotonic() - t0, 1),
                               waited_for_quiet_s=round(waited, 1), max_load=max_load)
            ls.dump(out)
    finally:
        runner.close()
    ls.recorded.update(complete=True, duration_s=round(time.monotonic() - t0, 1))
    ls.dump(out)
    return ls
