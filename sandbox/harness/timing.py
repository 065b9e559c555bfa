"""Timers for the kernel harness: wall or timing-thread CPU time per batch of calls; CUDA events per
call, or per batch of back-to-back calls for sub-millisecond kernels (see calibration.py).

Standalone (stdlib + torch); loaded by path before candidate code, so the clock functions bound
here are the originals even if the candidate later replaces ``time.perf_counter_ns``.

CUDA events only see the stream they are recorded on, so a candidate could hide work on a side
stream (reward hack #4). Each timed unit (a call, or a batch) is therefore followed by a wait on
the end event and then a device-wide synchronize: on an honest candidate the device is already
idle and that synchronize returns at once; any time it takes is work the events did not see,
reported as ``leftover``. Before every unit the last-level cache is flushed and persisting-L2
carve-outs are reset. The flush writes at least twice the device's last-level cache: torch
reports the L2, but AMD's CDNA3 parts put a 256 MB Infinity Cache (MALL) behind it, so a flush the
size of that cache does not evict it. Around every timed sample, outside its events, a
``clock_watch`` (when NVML answers) reads the GPU's clocks and clock-event reasons for that side.
"""

from __future__ import annotations

import math
import time

import torch

perf_ns = time.perf_counter_ns
mono_ns = time.monotonic_ns  # an independent clock for cross-checks
cpu_ns = time.thread_time_ns  # CLOCK_THREAD_CPUTIME_ID: the timing thread, ns resolution
proc_ns = time.process_time_ns  # every thread of the process: what the timing thread did not do


def _median_ci(xs: list) -> float:
    """Relative half-width of the distribution-free 95% CI of a median (order statistics)."""
    x, n = sorted(xs), len(xs)
    k = int(0.98 * math.sqrt(n))
    lo, hi, med = x[max(0, n // 2 - k)], x[min(n - 1, n // 2 + k)], x[n // 2]
    return (hi - lo) / (2 * med) if med > 0 else math.inf


def ratio_halfwidth(baseline: list, candidate: list) -> float:
    """Approximate relative half-width of the 95% CI of the speedup, cheap enough to ask after
    every round: the smaller of two views of it. Paired (1.96 x the median ratio's standard error,
    1.2533 robust sd / sqrt(n)) is right when load slows whole rounds; the two medians' own
    order-statistic CIs are right when single samples are preempted (a minority of slow samples
    barely moves a median, however much they scatter the ratios)."""
    n = min(len(baseline), len(candidate))
    if n < 5:
        return math.inf
    r = sorted(b / c for b, c in zip(baseline[:n], candidate[:n]) if c > 0)
    if len(r) < 5 or r[len(r) // 2] <= 0:
        return math.inf
    med = r[len(r) // 2]
    mad = sorted(abs(x - med) for x in r)[len(r) // 2]
    paired = 1.96 * 1.2533 * 1.4826 * mad / med / math.sqrt(len(r))
    return min(paired, math.hypot(_median_ci(baseline[:n]), _median_ci(candidate[:n])))


class CpuTimer:
    """Wall clock around a batch of calls, and this process's CPU time beside it.

    ``clock = "wall"`` reports latency, what users feel. ``clock = "cpu"`` reports the timing
    thread's CPU time (nanosecond resolution on Linux; process CPU time was noisy on this VM even
    when idle), which the harness picks for single-threaded CPU work: on a machine whose cores are all busy, wall time measures the scheduler's preemptions
    (robust CV of the paired ratio 69% beside two busy processes on 2 cores), CPU time measures
    the work (15%, no worse than quiet). CPU time would hide a parallel speedup and a candidate that
    waits on something, so it is never used with more than one thread, and the harness falls back
    to wall time when the candidate's wall/CPU stretch exceeds the reference's (see ``stretch``).
    Both readings of every sample are kept (``walls``, ``cpus``)."""

    def __init__(self) -> None:
        self.leftover_s = 0.0
        self.clock = "wall"
        self.walls: tuple[list[float], list[float]] = ([], [])
        self.cpus: tuple[list[float], list[float]] = ([], [])

    def start(self, clock: str) -> str:
        """The timed rounds begin: readings so far (warm-up, calibration) are dropped."""
        self.clock, self.t0 = clock, (cpu_ns(), proc_ns())
        for side in (0, 1):
            self.walls[side].clear()
            self.cpus[side].clear()
        return clock

    def sample(self, model, sets: list, start: int, inner: int, side: int):  # type: ignore[no-untyped-def]
        """(seconds per call on ``clock``, last output, its inputs) over ``inner`` calls, call i on
        input set (start + i) % len(sets). Outputs are dropped as soon as they are returned
        (holding one across the next call would change what the allocator does, and the timing);
        only the last one survives the timed region, for the harness's spot checks. Both clocks'
        readings are recorded for ``side``."""
        n = len(sets)
        order = [sets[(start + i) % n] for i in range(inner)]
        c0, t0 = cpu_ns(), perf_ns()
        for xs in order[:-1]:
            model(*xs)
        out = model(*order[-1])
        t1, c1 = perf_ns(), cpu_ns()
        wall, cpu = (t1 - t0) / 1e9 / inner, (c1 - c0) / 1e9 / inner
        self.walls[side].append(wall)
        self.cpus[side].append(cpu)
        return (cpu if self.clock == "cpu" else wall), out, order[-1]

    def stretch(self, side: int) -> float:
        """Wall time over CPU time for one side's timed samples: ~1 quiet, the same for both sides
        under load (they are interleaved); larger for a side that waits (I/O, another process)."""
        c = sum(self.cpus[side])
        return sum(self.walls[side]) / c if c > 0 else float("inf")


def cpu_or_wall(timer, samples: tuple, facts: dict) -> None:  # type: ignore[no-untyped-def]
    """Keep the timing thread's CPU time only where it cannot flatter the candidate: when other
    threads of the process worked (the thread clock misses their work) or the candidate stretches
    (wall over CPU) more than the reference (it waited on something CPU time does not count), the
    measurement falls back to its wall-clock samples, and the facts say so."""
    if not isinstance(timer, CpuTimer) or timer.clock != "cpu":
        return
    stretch = [round(timer.stretch(side), 3) for side in (0, 1)]
    mine, all_ = cpu_ns() - timer.t0[0], proc_ns() - timer.t0[1]
    share = round(max(0, all_ - mine) / max(mine, 1), 4)
    facts.update(stretch=stretch, other_threads_share=share)
    if all_ - mine > 0.05 * mine:
        note = f"other threads used {share:.0%} of the timing thread's CPU time: reported on wall time"
    elif stretch[1] > 1.25 * stretch[0]:
        note = (f"candidate wall/CPU stretch {stretch[1]:.2f} vs reference {stretch[0]:.2f}: "
                "it waits; reported on wall time")
    else:
        return
    for side in (0, 1):
        samples[side][:] = timer.walls[side][:len(samples[side])]
    facts.update(clock="wall", clock_note=note)


# Last-level caches torch's device properties do not report (AMD Infinity Cache / MALL).
_LLC_BYTES = {"MI300X": 256 << 20, "MI300A": 256 << 20, "MI325X": 256 << 20, "MI308X": 256 << 20,
              "MI350X": 256 << 20, "MI355X": 256 << 20}
_MIN_FLUSH = 128 << 20


def flush_bytes(name: str | None, l2_bytes: int | None) -> int:
    """Bytes to write so that nothing a previous call left in any cache level survives:
    twice the largest last-level cache known for the device, never less than 128 MB."""
    upper = (name or "").upper()
    llc = max([int(l2_bytes or 0)] + [v for k, v in _LLC_BYTES.items() if k in upper])
    return max(2 * llc, _MIN_FLUSH)


class TorchCuda:
    """What the CUDA timer needs from the device, in one place so a test can stand in for it."""

    def __init__(self, device: torch.device, l2) -> None:  # type: ignore[no-untyped-def]
        props = torch.cuda.get_device_properties(device)
        self.flush_bytes = flush_bytes(props.name, getattr(props, "L2_cache_size", None))
        self.buffer = torch.empty(self.flush_bytes, dtype=torch.uint8, device=device)
        self.l2, self.stream = l2, torch.cuda.current_stream(device)
        self.sync, self.now_ns = torch.cuda.synchronize, perf_ns

    def flush(self) -> None:
        """Persisting-L2 state reset, then the cache overwritten on the timed stream."""
        self.l2.reset(self.stream.cuda_stream)
        self.buffer.zero_()

    def events(self):  # type: ignore[no-untyped-def]
        """(start, end) on the timed stream: ``record()``, ``wait()``, ``seconds()`` between them."""
        return _EventPair(self.stream)


class _EventPair:
    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream
        self.ev0, self.ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self.ev0.record(self.stream)

    def stop(self) -> None:
        self.ev1.record(self.stream)

    def wait(self) -> None:
        self.ev1.synchronize()

    def seconds(self) -> float:
        return self.ev0.elapsed_time(self.ev1) / 1e3


class CudaTimer:
    """CUDA events around each call (``batch`` off) or around each sample's back-to-back calls
    (``batch`` on: the flush before the batch, every call on its own input set, the synchronize
    after it). ``watch`` brackets each timed sample, once ``start`` has been called."""

    def __init__(self, device: torch.device | None, l2, watch=None, cuda=None) -> None:  # type: ignore[no-untyped-def]
        self.cuda = cuda if cuda is not None else TorchCuda(device, l2)  # type: ignore[arg-type]
        self.flush_bytes = self.cuda.flush_bytes
        self.watch, self.recording, self.batch = watch, False, False
        self.leftover_s = 0.0  # device time after the end event: work on streams we did not time
        self.unit_lefts: tuple[list, list] = ([], [])  # (leftover, unit) seconds: reference, candidate
        self._side = 0

    def start(self, clock: str = "events") -> str:
        """The timed rounds begin: from now on every sample is bracketed by the clock watch."""
        self.recording = True
        return clock

    def stop(self, facts: dict | None = None) -> None:
        """The timed rounds are over; the watch's per-side readings go into ``facts``."""
        self.recording = False
        if self.watch is not None and facts is not None:
            facts.update(self.watch.facts())

    def units(self, inner: int) -> int:
        """Timed units (event pairs) in a sample of ``inner`` calls."""
        return 1 if self.batch else inner

    def sample(self, model, sets: list, start: int, inner: int, side: int):  # type: ignore[no-untyped-def]
        """(seconds per call, last output, its inputs) over ``inner`` calls, call i on input set
        (start + i) % len(sets)."""
        watch = self.watch if self.recording else None
        if watch is not None:
            watch.before()
        self._side = side
        seconds, out, xs = (self._batch if self.batch else self._calls)(model, sets, start, inner)
        if watch is not None:
            watch.after(side)
        return seconds, out, xs

    def _unit(self, model, order: list):  # type: ignore[no-untyped-def]
        """One event pair around ``order``'s calls; outputs are dropped as they return (holding one
        across the next call would change what the allocator does), but the last."""
        cuda = self.cuda
        cuda.flush()  # same stream, before the start event: evicts the caches
        ev = cuda.events()
        ev.start()
        for xs in order[:-1]:
            model(*xs)
        out = model(*order[-1])
        ev.stop()
        ev.wait()
        t0 = cuda.now_ns()
        cuda.sync()  # the whole device: anything still running was hidden from the events
        left = (cuda.now_ns() - t0) / 1e9
        took = ev.seconds()
        self.leftover_s += left
        self.unit_lefts[self._side].append((left, took))
        return took, out

    @staticmethod
    def _hid(left: float, took: float) -> bool:
        """A unit's leftover beyond both 50 us and half the unit: work its events did not see."""
        return left > 50e-6 and left > 0.5 * took

    @property
    def suspicious(self) -> int:
        """Timed units of either side whose leftover alone looks like hidden work."""
        return sum(self._hid(left, took) for side in self.unit_lefts for left, took in side)

    def hidden_units(self) -> int:
        """The candidate's timed units that left the device working after their end event for
        more than 50 us and half the unit *beyond the reference's median leftover*. The final
        synchronise's own latency is the environment's and hits both sides alike (right after a
        killed job's context was torn down on an H100 host, an honest clamp's units read as
        hidden work 3 times in a short measurement); hidden-stream work shows on one side only."""
        ref = sorted(left for left, _ in self.unit_lefts[0])
        base = ref[len(ref) // 2] if ref else 0.0
        return sum(self._hid(left - base, took) for left, took in self.unit_lefts[1])

    def hidden_work(self, candidate_units: int) -> bool:
        """More than a quarter of the candidate's units (at least 3) hid work from the timer."""
        return self.hidden_units() > max(2, candidate_units // 4)

    def _calls(self, model, sets: list, start: int, inner: int):  # type: ignore[no-untyped-def]
        total, out, xs = 0.0, None, sets[start % len(sets)]
        for i in range(inner):
            xs = sets[(start + i) % len(sets)]
            out = None  # the previous output is freed before the next call, as on CPU
            took, out = self._unit(model, [xs])
            total += took
        return total / inner, out, xs

    def _batch(self, model, sets: list, start: int, inner: int):  # type: ignore[no-untyped-def]
        n = len(sets)
        order = [sets[(start + i) % n] for i in range(inner)]
        took, out = self._unit(model, order)
        return took / inner, out, order[-1]
