"""The searchers compared by ``search_efficiency``: Arbor (a real campaign on the replay target),
Optuna TPE, random search and grid search — all paying for evaluations from the same replayed
measurements of the same landscape.

Cost is counted the same way for everyone: one replayed measurement is one evaluation. For Arbor
that is every row of its ``measurements`` table (the baseline's A/A run, confirmations of new
bests and re-measurements of unstable results included), which is what a live campaign would pay.

Quality is judged by the *true* speedup (the landscape's recorded value) of the configuration the
searcher currently believes is best: Arbor's best accepted node, the baselines' best observed
trial. A searcher reaches the target when that belief is within ``threshold`` of the optimum.
"""

from __future__ import annotations

import itertools
import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from arbor.targets.landscape import Landscape

INF = float("inf")


@dataclass
class Trace:
    method: str
    seed: int
    evals_to_target: float = INF  # inf: never reached within the budget
    evals_to_found: float = INF  # first evaluation *of* a within-target config (believed best or not)
    evals_total: int = 0
    final_true: float | None = None  # true speedup of the final belief
    final_reported: float | None = None  # what the searcher itself reported for it
    stop: str = ""
    curve: list = field(default_factory=list)  # (evals, true speedup of the belief) at each change

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Observer:
    """What a black-box tuner sees: the speedup estimate of one replayed measurement, from the same
    replay as Arbor's (``Landscape.replay``: the k-th measurement of a point under a seed)."""

    def __init__(self, ls: Landscape, seed: int):
        self.ls, self.seed, self.count = ls, seed, {}

    def __call__(self, config: dict) -> float | None:
        point = self.ls.point(config)
        if point is None or point.status != "ok" or not point.runs:
            return None
        key = self.ls.key(config)
        k = self.count.get(key, 0)
        self.count[key] = k + 1
        b, c, _ = self.ls.replay(point, self.seed, k)
        return statistics.median(b) / statistics.median(c)


class _Belief:
    """Best-observed-so-far bookkeeping shared by the black-box baselines."""

    def __init__(self, ls: Landscape, trace: Trace, target: float):
        self.ls, self.trace, self.target = ls, trace, target
        self.best_obs = -INF
        self.n = 0

    def tell(self, config: dict, observed: float | None) -> bool:
        """Count one evaluation; True once the belief reaches the target."""
        self.n += 1
        self.trace.evals_total = self.n
        if self.trace.evals_to_found == INF and (self.ls.true_speedup(config) or 0.0) >= self.target:
            self.trace.evals_to_found = self.n
        if observed is not None and observed > self.best_obs:
            self.best_obs = observed
            true = self.ls.true_speedup(config) or 0.0
            self.trace.final_true, self.trace.final_reported = true, observed
            self.trace.curve.append((self.n, round(true, 4)))
            if true >= self.target and self.trace.evals_to_target == INF:
                self.trace.evals_to_target = self.n
        return self.trace.evals_to_target != INF


def grid_configs(ls: Landscape) -> list[dict]:
    """Nested for-loops over the knobs in declared order (what a hand-written sweep does)."""
    names = [k.name for k in ls.knobs]
    return [dict(zip(names, vals)) for vals in itertools.product(*(k.values for k in ls.knobs))]


def run_random(ls: Landscape, seed: int, target: float) -> Trace:
    """Random search without replacement: every configuration at most once."""
    trace = Trace("random", seed)
    configs = grid_configs(ls)
    random.Random(f"random:{seed}").shuffle(configs)
    belief, observe = _Belief(ls, trace, target), Observer(ls, seed)
    for cfg in configs:
        if belief.tell(cfg, observe(cfg)):
            break
    trace.stop = "reached" if trace.evals_to_target != INF else "exhausted"
    return trace


def run_grid(ls: Landscape, seed: int, target: float) -> Trace:
    trace = Trace("grid", seed)
    belief, observe = _Belief(ls, trace, target), Observer(ls, seed)
    for cfg in grid_configs(ls):
        if belief.tell(cfg, observe(cfg)):
            break
    trace.stop = "reached" if trace.evals_to_target != INF else "exhausted"
    return trace


def _numeric(values: list) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def run_tpe(ls: Landscape, seed: int, target: float, max_trials: int | None = None,
            multivariate: bool = False) -> Trace:
    """Optuna's TPE as a user would set it up: ordered numeric knobs as an integer index over their
    values (so TPE can exploit order), categorical knobs as categorical; repeats cost evaluations."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trace = Trace("tpe-multivariate" if multivariate else "tpe", seed)
    observe = Observer(ls, seed)
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=multivariate)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    belief = _Belief(ls, trace, target)
    for _ in range(max_trials or 3 * ls.size()):
        trial = study.ask()
        cfg = {}
        for k in ls.knobs:
            if _numeric(k.values):
                cfg[k.name] = k.values[trial.suggest_int(k.name, 0, len(k.values) - 1)]
            else:
                cfg[k.name] = trial.suggest_categorical(k.name, list(k.values))
        value = observe(cfg)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
        if belief.tell(cfg, value):
            break
    trace.stop = "reached" if trace.evals_to_target != INF else "budget"
    return trace


# --- Arbor ---------------------------------------------------------------------------------
class _Reached(Exception):
    pass


def replay_spec(path: Path, ls: Landscape, name: str, policy: str, seed: int, workdir: Path,
                moves: str = "recorded", exploration: float = 1.0):
    """A replay campaign with the recorded campaign's Critic settings and a budget of the whole
    space (Arbor stops earlier when every accepted node's moves are exhausted)."""
    from arbor.spec import parse_spec

    critic = {k: v for k, v in (ls.campaign.get("critic") or {}).items()}
    seeds = (ls.campaign.get("measurement") or {}).get("seeds") or [0, 1, 2]
    data = {
        "name": name,
        "target": {"kind": "replay", "landscape": str(Path(path).resolve()), "seed": seed, "moves": moves},
        "budget": {"max_evaluations": ls.size(), "max_wall_s": 3600},
        "agents": {"policy": policy, "seed": seed, "exploration": exploration},
        "measurement": {"seeds": seeds},
        "critic": critic,
        "store": {"url": f"sqlite:///{workdir / 'bench.db'}"},
    }
    return parse_spec(data, f"<{name}>", workdir)


@dataclass
class Replayed:
    """One finished replay campaign of ``replay_seeds``: its store stays open until the next."""

    seed: int
    store: object
    landscape: Landscape
    campaign_id: int
    summary: object
    wall_s: float


def replay_seeds(path: str | Path, label: str, tag: str, seeds: list[int], budget: int,
                 scratch: str | None = None) -> Iterator[Replayed]:
    """Real PUCT campaigns on a replay landscape, one per seed (named ``label.tag.seed``), with
    ``budget`` evaluations each, in one store of a temporary directory removed afterwards."""
    from arbor.campaign.run import run_campaign
    from arbor.search_tree import open_store
    from arbor.targets.landscape import load_landscape

    ls = load_landscape(path)
    workdir = Path(tempfile.mkdtemp(prefix="arbor-replay-", dir=scratch))
    store = open_store(f"sqlite:///{workdir / 'bench.db'}")
    try:
        for s in seeds:
            name = f"{label}.{tag}.{s}"
            spec = replay_spec(Path(path), ls, name, "puct", s, workdir)
            spec.budget.max_evaluations = budget
            t0 = time.monotonic()
            summ = run_campaign(spec, lambda kind, data: None, store=store)
            yield Replayed(s, store, ls, store.get_campaign(name).id, summ, time.monotonic() - t0)
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


def run_arbor(path: Path, ls: Landscape, policy: str, seed: int, target: float, workdir: Path, store,
              moves: str = "recorded", exploration: float = 1.0) -> Trace:
    """One real campaign (orchestrator, specialist, Critic, store, LangGraph loop) on the replay
    target, stopped as soon as its best accepted node is truly within the target."""
    from arbor.agents.transforms.knobs import parse_config
    from arbor.campaign.run import run_campaign

    tag = f"arbor-{policy}" + ("" if moves == "recorded" else f"-{moves}")
    trace = Trace(tag, seed)
    name = f"{ls.name}.{tag}.{seed}.{random.Random().getrandbits(32):08x}"
    spec = replay_spec(path, ls, name, policy, seed, workdir, moves, exploration)
    cid: list[int] = []

    def count() -> int:
        if not cid:
            cid.append(store.get_campaign(name).id)
        return store.measurement_count(cid[0])

    def report(kind: str, data: dict) -> None:
        if kind != "new_best":
            return
        node = data["node"]
        true = ls.true_speedup(parse_config(store.get_artifact(node.artifact_sha)) or {}) or 0.0
        n = count()
        trace.final_true, trace.final_reported = true, node.speedup
        trace.curve.append((n, round(true, 4)))
        if true >= target:
            trace.evals_to_target = n
            raise _Reached

    root_true = ls.true_speedup(ls.default_config()) or 1.0
    trace.final_true, trace.final_reported = root_true, 1.0
    try:
        summary = run_campaign(spec, report, store=store)
        trace.stop = summary.stop_reason or ""
    except _Reached:
        trace.stop = "reached"
    trace.evals_total = count()
    trace.evals_to_found = _first_found(store, cid[0], ls, target) if cid else INF
    if root_true >= target:
        trace.evals_to_target = trace.evals_to_found = 1
    return trace


def _first_found(store, campaign_id: int, ls: Landscape, target: float) -> float:
    """Position (in measurement order) of the first measurement of a within-target config."""
    from arbor.agents.transforms.knobs import parse_config

    rows = store.measurements_after(campaign_id, 0, limit=10**6, samples=False)
    true_of: dict[str, float] = {}
    for i, m in enumerate(rows, 1):
        if m.artifact_sha not in true_of:
            true_of[m.artifact_sha] = ls.true_speedup(parse_config(store.get_artifact(m.artifact_sha)) or {}) or 0.0
        if true_of[m.artifact_sha] >= target:
            return i
    return INF


def percent_gap(true: float | None, optimum: float) -> float | None:
    return None if true is None else 100.0 * (1.0 - true / optimum)


def finite_or_none(x: float) -> float | None:
    return None if x is None or math.isinf(x) else x
