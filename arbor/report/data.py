"""Everything a report shows, gathered from the store in a handful of queries.

A report is written once, so unlike the dashboard it may read the whole campaign; it still reads
through a read-only store and bulk queries (``verdicts_after``/``measurements_after``) rather than
one query per node, so reporting a running campaign does not disturb it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

from arbor.campaign.final_best import FinalBest
from arbor.search_tree.records import CampaignRecord, MeasurementRecord, NodeRecord, VerdictRecord
from arbor.search_tree.store import Store

BIG = 10**9


def verdict_stats(v: VerdictRecord) -> dict:
    return v.stats


# Readings that change from one measurement to the next on the same machine (load, GPU clocks and
# temperature read around the timing): not part of *which* environment it was.
DYNAMIC_KEYS = frozenset({"loadavg_1m", "temperature_c", "power_w", "throttle_reasons", "sm_clock_mhz",
                          "mem_clock_mhz"})


def fingerprint_id(fp: dict) -> str:
    """A short hash of the static part of a measurement environment (host, CPU/GPU, driver,
    versions, threads, clock mode): equal ids, comparable timings."""
    if not fp:
        return "—"
    static = {k: v for k, v in fp.items() if k not in DYNAMIC_KEYS and not isinstance(v, dict)}
    return hashlib.sha256(json.dumps(static, sort_keys=True, default=str).encode()).hexdigest()[:10]


@dataclass
class Evaluation:
    """One finished candidate, in the order the campaign finished them."""

    index: int
    node: NodeRecord
    speedup: float | None  # the Critic's point estimate of the final judged measurement
    best_so_far: float


@dataclass
class Candidate:
    node: NodeRecord
    stats: dict
    fingerprint: dict

    @property
    def ci(self) -> tuple[float | None, float | None]:
        return self.stats.get("ci_low"), self.stats.get("ci_high")


@dataclass
class Front:
    label: str
    points: list[tuple[float, float]]  # (latency, throughput)
    x_name: str
    y_name: str


@dataclass
class ReportData:
    campaign: CampaignRecord
    nodes: list[NodeRecord]
    verdicts: dict[int, list[VerdictRecord]]
    measurements: dict[int, list[MeasurementRecord]]
    best: NodeRecord | None
    best_source: str | None
    root_source: str | None
    evaluations: list[Evaluation] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    fronts: list[Front] = field(default_factory=list)
    warm_start: dict | None = None  # the warm_start event: priors that came from the knowledge store
    calibration: dict | None = None  # Brier score / log-speedup error per agent and family
    profiles: list[tuple[str, dict]] = field(default_factory=list)  # (label, profile event): baseline, latest best
    # the number reported for ``best`` (the final verification's median when there is one, as in
    # the run summary and ``arbor best``), which number it is, and the CI of that same estimate
    reported: tuple[float | None, str, tuple[float, float] | None] = (None, "Critic value", None)
    # the final verification's side-by-side pairings of the best with its parent (verify._simplest)
    ancestor_checks: list[dict] = field(default_factory=list)
    # the final best and both its figures, as every surface shows them (arbor/campaign/final_best.py)
    final: FinalBest | None = None

    @property
    def root(self) -> NodeRecord | None:
        return next((n for n in self.nodes if n.id == self.campaign.root_node_id), None)

    def best_path(self) -> list[int]:
        by_id = {n.id: n for n in self.nodes}
        path, cur = [], self.best
        while cur is not None:
            path.append(cur.id)
            cur = by_id.get(cur.parent_id) if cur.parent_id is not None else None
        return path[::-1]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            out[n.state] = out.get(n.state, 0) + 1
        return dict(sorted(out.items()))

    def diagnoses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in self.nodes:
            if n.parent_id is not None and n.diagnosis:
                out[n.diagnosis] = out.get(n.diagnosis, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def final_stats(self, node_id: int) -> dict:
        """Stats of the node's last judged measurement (accept verdict first when there is one)."""
        vs = self.verdicts.get(node_id, [])
        for v in reversed(vs):
            if v.decision == "accept" and verdict_stats(v):
                return verdict_stats(v)
        for v in reversed(vs):
            if verdict_stats(v):
                return verdict_stats(v)
        return {}


def _front_points(stats: dict) -> Front | None:
    """Serving measurements carry a list of load points; take throughput vs latency from it.
    Tolerant of naming: any key with 'throughput'/'tok_s'/'rps' against any with 'latency'/'p99'/'e2e'."""
    for key in ("pareto", "front", "points", "sweep"):
        pts = stats.get(key)
        if not (isinstance(pts, list) and pts and all(isinstance(p, dict) for p in pts)):
            continue
        keys = list(pts[0].keys())
        ys = [k for k in keys if any(s in k.lower() for s in ("throughput", "tok_s", "tokens_per_s", "rps"))]
        xs = [k for k in keys if any(s in k.lower() for s in ("latency", "p99", "e2e", "tpot", "ttft"))]
        if not xs or not ys:
            continue
        out = []
        for p in pts:
            x, y = p.get(xs[0]), p.get(ys[0])
            if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and math.isfinite(y):
                out.append((float(x), float(y)))
        if out:
            return Front("", sorted(out), xs[0], ys[0])
    return None


def _critic_fronts(data: ReportData) -> list[Front]:
    """The serving Critic's own fronts: the best node's accepted verdict carries the baseline's and
    the candidate's front measured interleaved (``front_baseline``/``front_candidate``: lists of
    [throughput req/s, latency ms, label])."""
    best = data.best
    if best is None or best.parent_id is None:
        return []
    stats = data.final_stats(best.id)
    fronts = []
    for key, label in (("front_baseline", "baseline"), ("front_candidate", f"best (node {best.id})")):
        pts = [(float(p[1]), float(p[0])) for p in stats.get(key) or []
               if isinstance(p, (list, tuple)) and len(p) >= 2 and all(isinstance(v, (int, float)) for v in p[:2])]
        if pts:
            fronts.append(Front(label, sorted(pts), "latency (ms, the SLO percentile)", "throughput (requests/s)"))
    return fronts


def _serving_fronts(data: ReportData) -> list[Front]:
    fronts = _critic_fronts(data)
    if fronts:
        return fronts
    for label, node in (("baseline", data.root), ("best", data.best)):
        if node is None or (label == "best" and data.root is not None and node.id == data.root.id):
            continue
        sources = [m.stats for m in reversed(data.measurements.get(node.id, [])) if m.stats]
        sources += [verdict_stats(v) for v in reversed(data.verdicts.get(node.id, []))]
        for stats in sources:
            f = _front_points(stats)
            if f is not None:
                f.label = f"{label} (node {node.id})"
                fronts.append(f)
                break
    return fronts


def _reported_best(store: Store, nodes: list[NodeRecord], verified: dict | None) -> tuple:
    """The best node and its number as every other surface reports them (``final_best.pick``:
    the final verification may pick a runner-up over the highest Critic value, and then its
    median is the number), with the CI of that same estimate."""
    from arbor.campaign.final_best import pick
    from arbor.campaign.one_number import paired_estimate

    final = pick(nodes, verified)
    if final.verified and final.node is not None:
        est = paired_estimate(store, final.node.id, final.speedup)
        return final, (final.speedup, final.which, est[2] if est else None)
    return final, (final.speedup, final.which, None)


def load(store: Store, campaign: CampaignRecord, top: int = 10) -> ReportData:
    from arbor.campaign.verify import read_final_verification

    nodes = store.nodes(campaign.id)
    verdicts: dict[int, list[VerdictRecord]] = {}
    for v in store.verdicts_after(campaign.id, 0, limit=BIG):
        verdicts.setdefault(v.node_id, []).append(v)
    measurements: dict[int, list[MeasurementRecord]] = {}
    for m in store.measurements_after(campaign.id, 0, limit=BIG, samples=False):
        measurements.setdefault(m.node_id, []).append(m)
    verified = read_final_verification(store, campaign.id)
    final, reported = _reported_best(store, nodes, verified)
    best = final.node
    root = next((n for n in nodes if n.id == campaign.root_node_id), None)
    data = ReportData(campaign, nodes, verdicts, measurements, best,
                      store.get_artifact(best.artifact_sha) if best else None,
                      store.get_artifact(root.artifact_sha) if root else None, reported=reported,
                      ancestor_checks=list((verified or {}).get("ancestor_checks", [])), final=final)
    finished = [n for n in nodes if n.parent_id is not None and n.finished_at is not None]
    finished.sort(key=lambda n: (n.finished_at, n.id))
    best_so_far = 1.0
    for i, n in enumerate(finished, 1):
        sp = data.final_stats(n.id).get("speedup")
        if n.state == "accepted" and n.speedup is not None:
            best_so_far = max(best_so_far, n.speedup)
            sp = n.speedup
        data.evaluations.append(Evaluation(i, n, float(sp) if isinstance(sp, (int, float)) else None, best_so_far))
    accepted = sorted((n for n in nodes if n.state == "accepted" and n.parent_id is not None and n.value is not None),
                      key=lambda n: (-n.value, n.id))[:top]
    for n in ([root] if root is not None else []) + accepted:
        fps = [m.fingerprint for m in data.measurements.get(n.id, []) if m.fingerprint]
        data.candidates.append(Candidate(n, data.final_stats(n.id), fps[-1] if fps else {}))
    data.fronts = _serving_fronts(data)
    from .knowledge import load_knowledge

    data.warm_start, data.calibration = load_knowledge(store, campaign.id)
    from .profile import load_profiles

    data.profiles = load_profiles(store, campaign.id, campaign.root_node_id)
    return data
