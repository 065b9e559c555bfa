"""Small kernels timed in batches on CUDA (issue 25): the calibration and the CUDA timer's logic,
driven without a GPU through a simulated device (a host clock and a device timeline, launches that
cost the host time and queue work on the device, events that complete when the stream reaches
them). The real device is checked by the gpu-marked tests in test_cuda_timing_gpu.py."""

from __future__ import annotations

import random
import statistics

import pytest

from arbor.sandbox.harness import calibration, timing


class Device:
    """What ``timing.CudaTimer`` asks of CUDA. ``wake_s``: extra host latency (uniform up to it) of
    the first launch after the host waited for the device, which a call timed alone pays every time."""

    flush_bytes = 128 << 20

    def __init__(self, seed: int = 0, wake_s: float = 0.0) -> None:
        self.host = self.gpu = self.side = 0.0
        self.flushes = self.syncs = 0
        self.waited = False
        self.rng, self.wake_s = random.Random(seed), wake_s

    def now_ns(self) -> int:
        return int(self.host * 1e9)

    def launch(self, work_s: float, host_s: float, side_s: float = 0.0) -> None:
        self.host += host_s * (1 + 0.05 * self.rng.random())
        if self.waited and self.wake_s:
            self.host += self.wake_s * self.rng.random()
        self.waited = False
        self.gpu = max(self.gpu, self.host) + work_s
        if side_s:  # another stream: runs beside the timed one, the events never see it
            self.side = max(self.side, self.host) + side_s

    def flush(self) -> None:
        self.flushes += 1
        self.host += 5e-6
        self.gpu = max(self.gpu, self.host) + 30e-6

    def events(self) -> "Events":
        return Events(self)

    def sync(self) -> None:
        self.syncs += 1
        self.host, self.waited = max(self.host, self.gpu, self.side), True


class Events:
    def __init__(self, dev: Device) -> None:
        self.dev = dev

    def start(self) -> None:
        self.t0 = max(self.dev.gpu, self.dev.host)

    def stop(self) -> None:
        self.t1 = max(self.dev.gpu, self.dev.host)

    def wait(self) -> None:
        self.dev.host = max(self.dev.host, self.t1)

    def seconds(self) -> float:
        return self.t1 - self.t0


class Kernel:
    """A model: each call costs the host ``host_s`` to launch and the device ``work_s``."""

    def __init__(self, dev: Device, work_s: float, host_s: float = 20e-6, side_s: float = 0.0) -> None:
        self.dev, self.work_s, self.host_s, self.side_s = dev, work_s, host_s, side_s
        self.seen: list[int] = []

    def __call__(self, x):  # type: ignore[no-untyped-def]
        self.seen.append(x)
        self.dev.launch(self.work_s, self.host_s, self.side_s)
        return ("out", x)


def _harness(dev: Device, models, *, min_sample_s=2e-3, warmup_s=0.05, set_bytes=1 << 20, budget=1 << 30):
    """The harness's use of calibrate() and CudaTimer, with the simulated device."""
    timer = timing.CudaTimer(None, None, cuda=dev)
    pools = [[[1000 * s + k] for k in range(calibration.POOL_SIZE)] for s in (0, 1)]

    def sample(side: int, start: int, inner: int) -> float:
        return timer.sample(models[side], pools[side], start, inner, side)[0]

    def grow(side: int, want: int) -> None:
        pools[side].extend([1000 * side + k] for k in range(len(pools[side]), want))

    plan = calibration.calibrate(sample, grow, warmup_s=warmup_s, min_sample_s=min_sample_s, cuda=True,
                                 set_bytes=set_bytes, budget_bytes=budget,
                                 set_batch=lambda on: setattr(timer, "batch", on), clock=dev.now_ns)
    return timer, plan, pools, sample


def test_sub_millisecond_kernels_are_timed_in_batches_of_at_least_the_batch_floor():
    dev = Device()
    ref, new = Kernel(dev, 150e-6), Kernel(dev, 40e-6)
    timer, plan, pools, sample = _harness(dev, (ref, new))
    assert plan.batch and timer.batch
    for side in (0, 1):
        # one batch lasts at least BATCH_MIN_SAMPLE_S (the refining batch measured back-to-back calls)
        assert plan.inner[side] * plan.batch_per_call_s[side] >= calibration.BATCH_MIN_SAMPLE_S * 0.999
        assert len(pools[side]) == plan.inner[side] + 1  # every call of a batch has its own input set
    assert plan.inner[1] > plan.inner[0] > 60  # no 64-call cap in batch mode: the faster side gets more calls
    flushes, syncs, ref.seen[:] = dev.flushes, dev.syncs, []
    per_call = sample(0, 5 * plan.inner[0], plan.inner[0])
    assert (dev.flushes - flushes, dev.syncs - syncs) == (1, 1)  # one flush before, one synchronize after
    assert len(ref.seen) == plan.inner[0] == len(set(ref.seen))  # distinct sets, none reused
    assert per_call == pytest.approx(150e-6, rel=0.02)  # device-bound: the calls' device time


def test_millisecond_kernels_keep_one_event_pair_per_call_on_both_sides():
    dev = Device()
    ref, new = Kernel(dev, 2e-3), Kernel(dev, 0.1e-3)  # the candidate is sub-ms, the reference is not
    timer, plan, pools, sample = _harness(dev, (ref, new), min_sample_s=2e-3)
    assert not plan.batch and not timer.batch  # decided by the reference: both sides timed alike
    assert plan.inner[0] == 1 and plan.inner[1] == 20
    flushes, syncs = dev.flushes, dev.syncs
    sample(1, 0, plan.inner[1])
    assert (dev.flushes - flushes, dev.syncs - syncs) == (20, 20)  # a flush and a sync per call
    dev = Device()
    _, plan, _, _ = _harness(dev, (Kernel(dev, 2e-3), Kernel(dev, 1e-6)))
    assert plan.inner[1] == calibration.CUDA_MAX_INNER  # per-call mode: inner only averages


def test_a_launch_bound_kernel_is_measured_tightly_in_batches_and_loosely_alone():
    """The quickstart's failure mode: a call timed alone starts on an idle device and pays its wake-up
    jitter; back-to-back calls keep the device fed. Same simulated device, A/A, both modes."""
    def aa_spread(batch: bool) -> float:
        dev = Device(seed=3, wake_s=300e-6)
        timer = timing.CudaTimer(None, None, cuda=dev)
        timer.batch = batch
        k = Kernel(dev, 60e-6, host_s=150e-6)  # launch bound: the host is the bottleneck
        pool = [[i] for i in range(200)]
        inner = 100 if batch else 12
        ratios = [timer.sample(k, pool, 0, inner, 0)[0] / timer.sample(k, pool, 0, inner, 1)[0] for _ in range(60)]
        med = statistics.median(ratios)
        return statistics.median(abs(r - med) for r in ratios) / med

    loose, tight = aa_spread(batch=False), aa_spread(batch=True)
    assert tight < 0.01 < loose and tight < loose / 3


def test_work_hidden_on_a_side_stream_is_still_exposed_per_batch():
    dev = Device()
    honest, hidden = Kernel(dev, 100e-6), Kernel(dev, 1e-6, side_s=100e-6)
    timer = timing.CudaTimer(None, None, cuda=dev)
    timer.batch = True
    pool = [[i] for i in range(50)]
    timer.sample(honest, pool, 0, 40, 0)
    assert timer.suspicious == 0
    for _ in range(3):
        timer.sample(hidden, pool, 0, 40, 1)
    assert timer.suspicious == 3 and timer.leftover_s > 3 * 40 * 60e-6  # 4 ms of side work, launched over 0.8 ms
    assert timer.units(40) == 1  # the harness's limit counts batches, not calls
    assert timer.hidden_units() == 3 and timer.hidden_work(3)


class SlowSync(Device):
    """A device whose final synchronise the environment delays (another context being torn down,
    the host preempted): 200 us after every unit, whoever ran it."""

    def sync(self) -> None:
        super().sync()
        self.host += 200e-6


def test_a_slow_synchronise_on_both_sides_is_not_hidden_work():
    def run(candidate_side_s: float) -> timing.CudaTimer:
        dev = SlowSync()
        timer = timing.CudaTimer(None, None, cuda=dev)
        ref, new = Kernel(dev, 10e-6), Kernel(dev, 1e-6 if candidate_side_s else 10e-6, side_s=candidate_side_s)
        pool = [[i] for i in range(8)]
        for _ in range(6):
            timer.sample(ref, pool, 0, 4, 0)
            timer.sample(new, pool, 0, 4, 1)
        return timer

    honest, hiding = run(0.0), run(100e-6)
    assert honest.suspicious == 48  # every unit waits 200 us in its final synchronise
    assert honest.hidden_units() == 0 and not honest.hidden_work(24)
    assert hiding.hidden_units() == 24 and hiding.hidden_work(24)


def test_pool_sets_follow_the_calls_of_a_sample_within_the_memory_budget():
    assert calibration.pool_sets(100, 1 << 20, 1 << 30) == 101
    assert calibration.pool_sets(100, 64 << 20, 1 << 30) == 16  # capped: 1 GB of inputs, far beyond L2
    assert calibration.pool_sets(10, 1 << 40, 1 << 30) == calibration.POOL_SIZE
    assert calibration.inner_for(1e-6, 0.01) == 10_000 and calibration.inner_for(1.0, 0.01) == 1
    assert calibration.inner_for(0.1, 2.0) == 2  # at most MAX_SAMPLE_S per sample
    assert calibration.steady_per_call([5.0, 1.0, 2.0, 3.0]) == 2.0  # the first call is left out


def test_the_clock_watch_brackets_only_the_timed_samples_and_attributes_them():
    dev = Device()
    readings = []

    class Watch:
        def before(self) -> None:
            readings.append(("before", dev.gpu <= dev.host))

        def after(self, side: int) -> None:
            readings.append(("after", side, dev.gpu <= dev.host))

        def facts(self) -> dict:
            return {"sides": "seen"}

    timer = timing.CudaTimer(None, None, Watch(), cuda=dev)
    timer.batch = True
    k, pool = Kernel(dev, 50e-6), [[i] for i in range(10)]
    timer.sample(k, pool, 0, 5, 0)  # warm-up: not watched
    assert readings == []
    timer.start()
    timer.sample(k, pool, 0, 5, 0)
    timer.sample(k, pool, 0, 5, 1)
    facts: dict = {}
    timer.stop(facts)
    timer.sample(k, pool, 0, 5, 1)  # after the rounds: not watched
    # each reading is taken with the device idle: outside the events, after the synchronize
    assert readings == [("before", True), ("after", 0, True), ("before", True), ("after", 1, True)]
    assert facts == {"sides": "seen"}


def test_the_torch_glue_calls_cuda_as_the_old_per_call_timer_did(monkeypatch):
    """TorchCuda (the real device behind CudaTimer) against stand-ins for the torch.cuda calls it
    makes: properties for the flush size, events on the current stream, a device synchronize."""
    log: list = []

    class Ev:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing
            self.t = None

        def record(self, stream) -> None:  # type: ignore[no-untyped-def]
            self.t = len(log)
            log.append(("record", stream))

        def synchronize(self) -> None:
            log.append("event.synchronize")

        def elapsed_time(self, other) -> float:  # type: ignore[no-untyped-def]
            return 2.0  # ms

    class Stream:
        cuda_stream = 1234

    class L2:
        def reset(self, handle) -> None:  # type: ignore[no-untyped-def]
            log.append(("l2.reset", handle))

    props = type("P", (), {"name": "NVIDIA H100 80GB HBM3", "L2_cache_size": 50 << 20})()
    monkeypatch.setattr(timing.torch.cuda, "get_device_properties", lambda d: props)
    monkeypatch.setattr(timing.torch.cuda, "current_stream", lambda d: Stream())
    monkeypatch.setattr(timing.torch.cuda, "Event", Ev)
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda: log.append("device.synchronize"))
    monkeypatch.setattr(timing.torch, "empty", lambda n, dtype, device: type(
        "B", (), {"zero_": lambda self: log.append("flush")})())
    timer = timing.CudaTimer("cuda:0", L2())
    assert timer.flush_bytes == 128 << 20  # twice L2, at least 128 MB
    seconds, out, xs = timer.sample(lambda x: log.append(("call", x)) or x, [[1], [2], [3]], 1, 2, 0)
    assert (seconds, out, xs) == (2e-3, 3, [3])
    calls = [e for e in log if isinstance(e, tuple) and e[0] == "call"]
    assert calls == [("call", 2), ("call", 3)] and log.count("flush") == 2 and log.count("device.synchronize") == 2
    log.clear()
    timer.batch = True
    seconds, out, xs = timer.sample(lambda x: log.append(("call", x)) or x, [[1], [2], [3]], 1, 2, 0)
    assert seconds == 1e-3 and out == 3  # one event pair around both calls
    assert [e if not isinstance(e, tuple) else e[0] for e in log] == [
        "l2.reset", "flush", "record", "call", "call", "record", "event.synchronize", "device.synchronize"]
