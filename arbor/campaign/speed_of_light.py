"""Where a kernel campaign stands against the speed of light (docs/architecture.md#speed-of-light).

The reference's cost (bytes its inputs and outputs must move, FLOPs it does and the transcendental
evaluations — exp, erf, tanh, ... — it makes: the harness's ``cost`` fact) over the rates the
campaign runs at (the harness's ``sol_peak``: on CPU measured at the campaign's own thread count,
bandwidth at the problem's working set; on a GPU measured on the board, else its datasheet row) is
the least time any implementation that does the reference's work can take: the slower of the
memory bound and the compute bound (FLOPs at the FMA rate plus each transcendental at this
machine's measured vector rate of it), named in every readout, so ``left`` is the lower of the two
headrooms. The reference's and the best's fractions of it say how much headroom is left at these
settings, and what it would take to get more (more threads, a lower precision, fewer bytes or
FLOPs, cheaper transcendentals) — shown by the run summary and ``arbor show``, and the
``budget.sol_margin`` stop.

A fraction above 1 is impossible for the memory bound (no implementation moves fewer bytes than
its inputs and outputs); within ``ABOVE_PEAK_TOLERANCE`` it is the peak's measurement noise and
reads 100%, beyond it it is reported as a bug, not a number. Only the compute bound can be beaten
honestly, by doing fewer FLOPs than the reference (an algebraic rewrite) or cheaper transcendentals
(a polynomial within the tolerance where ATen's is exact), and is then said so.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from arbor.sandbox.gpu import (ABOVE_PEAK_TOLERANCE, bandwidth_at, flops_at, merge_peaks, sol_rates, speed_of_light,
                              within_peak)

# The two readings beyond the compute bound, told apart by who runs: a candidate faster than the
# reference's FLOPs allow does less (or cheaper) math; the reference itself cannot, so its peak is low.
FEWER_FLOPS = ("beyond the reference's compute bound: it does fewer FLOPs than the reference (an algebraic "
               "rewrite) or cheaper transcendentals (a polynomial within the tolerance); the fraction is of its "
               "memory bound")
PEAK_LOW = ("the reference outran the measured FLOP peak (measured on a busy machine?): read as 100%; the next "
            "measurement measures the peak again")


@dataclass(frozen=True)
class Position:
    seconds: float  # the speed-of-light time of one call of the reference's work
    memory_s: float
    compute_s: float
    bound: str  # memory | compute
    bytes: float | None
    flops: float | None
    dtype: str | None
    bytes_per_s: float | None
    flops_per_s: float | None
    source: str | None
    threads: int | None
    reference_s: float | None  # the reference's median time per call in the baseline's measurement
    device: str = "cpu"
    cores: int | None = None  # every core the sandbox allows (CPU)
    all_cores_bytes_per_s: float | None = None  # their stream rate (the Critic's floor peak)
    all_cores_flops_per_s: float | None = None
    half_flops_per_s: float | None = None  # the bfloat16 GEMM rate at the campaign's threads
    transcendentals: dict | None = None  # evaluations per call per function (exp, erf, ...)
    transcendental_s: float = 0.0  # their share of compute_s
    vector_measured: bool = False  # at this machine's measured vector rates, else FLOP equivalents

    @property
    def left(self) -> float | None:
        """The most the reference can still be sped up at these settings: its time over the speed
        of light, the slower of the memory and the compute bound — so the lower of the two
        headrooms. None without a reference time."""
        return self.left_at(self.reference_s)

    def left_at(self, seconds: float | None) -> float | None:
        """``left`` for any time per call (the best's: what is left beyond it)."""
        return seconds / self.seconds if seconds and seconds > 0 and self.seconds > 0 else None

    def fraction(self, seconds: float | None) -> float | None:
        """The raw fraction of the speed of light a time per call reaches (may exceed 1: see
        ``reading``)."""
        return self.seconds / seconds if seconds and seconds > 0 else None

    def reading(self, seconds: float | None) -> tuple[float | None, str | None]:
        """(fraction to show, a note) for a time per call: capped by physics; beyond the memory
        bound's tolerance a bug report, beyond only the compute bound what that means."""
        frac = self.fraction(seconds)
        if frac is None:
            return None, None
        mem = self.memory_s / seconds if self.memory_s else 0.0
        if mem > 1.0 + ABOVE_PEAK_TOLERANCE:
            return None, (f"BUG: {frac:.0%} of the speed of light — faster than its bytes can move "
                          f"({self.describe()}): the peak is too low (measured on a busy machine? the next "
                          f"measurement measures it again), or the cost or the time is wrong — please report it")
        shown = within_peak(frac)
        if shown is None and self.reference_s and seconds >= self.reference_s * (1 - 1e-3):
            # the reference's own math outran the FLOP peak: it cannot do less math than itself, so
            # the peak was measured low (check_peaks marks it stale; the next job measures it again)
            return 1.0, PEAK_LOW
        if shown is None:  # beats the reference's compute bound only: it does less (or cheaper) math
            return within_peak(mem), FEWER_FLOPS
        return shown, None

    def describe(self) -> str:
        """Which bound binds, what it counts, and the other bound beside it: 'memory-bound: 128 MB at
        24.8 GB/s = 5.16 ms (measured, 1 thread); compute 0.4 ms' or 'compute-bound: 4.19M erf at
        0.35 G/s + 0.0168 GFLOP at 50.8 GFLOP/s = 12.3 ms (measured, 1 thread); memory 2.61 ms'."""
        memory = f"{(self.bytes or 0) / 1e6:.3g} MB at {(self.bytes_per_s or 0) / 1e9:.3g} GB/s"
        if self.bound == "memory":
            other = f"; compute {_ms(self.compute_s)}" if self.compute_s else "; compute not counted"
            return f"memory-bound: {memory} = {_ms(self.seconds)} ({self.source or 'peak'}){other}"
        parts = []
        for fn, n in sorted((self.transcendentals or {}).items(), key=lambda kv: -kv[1]):
            parts.append(f"{n / 1e6:.3g}M {fn}")
        if parts:
            parts[-1] += " at the measured vector rates or the generated math" if self.vector_measured else " at FLOP equivalents"
        if self.flops:
            parts.append(f"{self.flops / 1e9:.3g} GFLOP at {(self.flops_per_s or 0) / 1e9:.3g} GFLOP/s")
        return (f"compute-bound: {' + '.join(parts)} = {_ms(self.seconds)} ({self.source or 'peak'}); "
                f"memory {_ms(self.memory_s)}")

    def advice(self) -> str:
        """What it would take to go faster than this speed of light."""
        ways = []
        more_cores = self.cores and self.threads and self.cores > self.threads
        if self.bound == "memory":
            if more_cores and self.all_cores_bytes_per_s and self.bytes_per_s:
                ways.append(f"more threads (target.num_threads: {self.cores} cores stream "
                            f"{self.all_cores_bytes_per_s / 1e9:.3g} GB/s, "
                            f"{self.all_cores_bytes_per_s / self.bytes_per_s:.2f}x)")
            elif more_cores:
                ways.append("more threads (target.num_threads)")
            if (self.dtype or "float32") in ("float32", "float64"):
                ways.append("a lower precision (target.dtype bfloat16 moves half the bytes)")
            ways.append("fewer bytes (fusing this problem with the operators around it)")
        else:
            if more_cores and self.all_cores_flops_per_s and self.flops_per_s:
                ways.append(f"more threads (target.num_threads: {self.cores} cores reach "
                            f"{self.all_cores_flops_per_s / 1e9:.3g} GFLOP/s, "
                            f"{self.all_cores_flops_per_s / self.flops_per_s:.2f}x)")
            elif more_cores:
                ways.append("more threads (target.num_threads)")
            half = self.half_flops_per_s
            if (self.dtype or "float32") in ("float32", "float64") and half and self.flops_per_s and \
                    half > 1.1 * self.flops_per_s:
                ways.append(f"a lower precision (target.dtype bfloat16: {half / self.flops_per_s:.1f}x the FLOP rate)")
            if self.transcendental_s > 0.5 * self.compute_s:
                ways.append("cheaper transcendentals (a vectorized polynomial within the tolerance)")
            ways.append("fewer FLOPs (an algebraic rewrite)")
        return ", ".join(ways[:-1]) + (" or " if len(ways) > 1 else "") + ways[-1]

    def line(self, reference_s: float | None, best_s: float | None) -> str:
        """One line for summaries: both fractions, the bound and the headroom left."""
        parts = []
        same = best_s is None or reference_s is None or abs(best_s - reference_s) <= 1e-3 * reference_s
        for who, t in (("reference", reference_s),) + ((("best", best_s),) if not same else ()):
            shown, note = self.reading(t)
            if note and note.startswith("BUG"):
                return note
            if shown is not None:
                parts.append(f"{who} {shown:.0%}" + ({FEWER_FLOPS: " (fewer FLOPs than the reference)",
                                                      PEAK_LOW: " (the measured FLOP peak is low)"}.get(note, "")))
        if not parts:
            return f"speed of light {self.describe()}"
        text = f"{' · '.join(parts)} of {self.describe()}"
        shown, note = self.reading(best_s or reference_s)
        if shown and not note:
            text += f"; at most {1 / shown:.2f}x left at these settings, more needs {self.advice()}"
        return text

    def to_dict(self) -> dict:
        return asdict(self)


def _ms(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:.3g} ms" if s >= 1e-4 else f"{s * 1e6:.3g} us"


def from_measurement(stats: dict | None, fingerprint: dict | None, reference_s: float | None) -> Position | None:
    """The position a measurement's facts give (cost, sol_peak, the floor's peak), or None when the
    target has no cost or no peak is known (replayed and serving targets, old stores)."""
    stats, fingerprint = stats or {}, fingerprint or {}
    c = stats.get("cost") or {}
    if not c.get("bytes"):
        return None
    measured = stats.get("sol_peak") or stats.get("peak")
    rates = sol_rates(fingerprint, c.get("dtype"), measured, c.get("bytes"))
    sol = speed_of_light(c.get("bytes"), c.get("flops"), rates, c.get("transcendentals"))
    if sol is None:
        return None
    floor = stats.get("peak") or {}
    device = str(fingerprint.get("device") or "cpu")
    cpu = not device.startswith("cuda")
    return Position(
        seconds=sol["seconds"], memory_s=sol["memory_s"], compute_s=sol["compute_s"], bound=sol["bound"],
        bytes=sol["bytes"], flops=sol["flops"], dtype=c.get("dtype"), bytes_per_s=sol["bytes_per_s"],
        flops_per_s=sol["flops_per_s"], source=sol["source"], threads=sol.get("threads"), reference_s=reference_s,
        device=device, cores=fingerprint.get("cpu_affinity") if cpu else None,
        all_cores_bytes_per_s=bandwidth_at(floor, c.get("bytes")) if cpu and floor else None,
        all_cores_flops_per_s=flops_at(floor, c.get("dtype")) if cpu and floor else None,
        half_flops_per_s=flops_at(measured, "bfloat16") if measured and measured.get("flops") else None,
        transcendentals=sol.get("transcendentals"), transcendental_s=sol.get("transcendental_s") or 0.0,
        vector_measured=bool(sol.get("vector_measured")))


def reference_position(store, root_id: int | None, also: int | None = None) -> Position | None:  # type: ignore[no-untyped-def]
    """The campaign's position from its baseline's latest correct measurement. The peaks are the
    best that measurement and ``also``'s latest one carried (merged by maximum): a peak measured on
    a busy machine is measured again by a later job, and the position reads the better one."""
    if root_id is None:
        return None
    ms = [m for m in store.measurements(root_id) if m.status == "ok" and m.baseline_samples]
    if not ms:
        return None
    m = ms[-1]
    stats = dict(m.stats or {})
    if also is not None and also != root_id:
        later = [x for x in store.measurements(also) if x.status == "ok"]
        for key in ("peak", "sol_peak"):
            a, b = stats.get(key), (later[-1].stats or {}).get(key) if later else None
            if a and b and a.get("bandwidth") and b.get("bandwidth") and a.get("threads") == b.get("threads"):
                stats[key] = merge_peaks(a, b)
    return from_measurement(stats, m.fingerprint, statistics.median(m.baseline_samples))


def node_seconds(store, node_id: int) -> float | None:  # type: ignore[no-untyped-def]
    """A node's time per call: the candidate side of its latest correct measurement."""
    ms = [m for m in store.measurements(node_id) if m.status == "ok" and m.candidate_samples]
    return statistics.median(ms[-1].candidate_samples) if ms else None


@dataclass
class SolCache:
    """The running campaign's position, kept until its key changes (``Context.speed_of_light``)."""
    key: tuple | None = None  # (baseline, its measurement count, best)
    position: Position | None = None


def for_context(ctx) -> Position | None:  # type: ignore[no-untyped-def]
    """The running campaign's position, computed again when the baseline is measured again or a
    new best brings newer peaks."""
    root = ctx.campaign.root_node_id
    if root is None:
        return None
    best = ctx.index.best()
    key = (root, len(ctx.store.measurements(root)), best.id if best is not None else None)
    cache = ctx.speed_of_light
    if cache.key != key:
        cache.key, cache.position = key, reference_position(ctx.store, root, best.id if best is not None else None)
    return cache.position
