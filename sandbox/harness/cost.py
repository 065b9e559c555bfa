"""What work costs: the bytes and FLOPs a problem (or one profiled operator) must move and do at
least, and the rates this machine reaches, so that cost over rate is a speed-of-light time.

Three users: the Critic's speed-of-light floor (reward hack #12 in
docs/integrity.md#reward-hacks) divides the reference's cost by the peak of every core the sandbox
allows; the campaign's speed-of-light position (docs/architecture.md#stopping) divides it by the
peak at the campaign's own thread count; and bottleneck profiles (``profile_harness.py``) give
each operator its own bytes and FLOPs — once: torch.profiler events nest (``aten::relu`` calls
``aten::clamp_min``), and a parent credited with its children's bytes in its own short self time
reads far above any peak.

FLOPs come from the profiler's estimates (GEMMs, convolutions, add, mul) and, for every other op,
``op_math.py``'s per-element table, which also counts transcendental evaluations (exp, erf, tanh,
...) apart: the speed of light reads those at the machine's vector rate of each function
(``measure_vector_rates``, measured with the CPU peak), so an erf-bound GELU reads compute-bound.

Bytes are lower bounds of the traffic (inputs read once, what an op allocates written once,
nothing for views), so a rate computed from them can only understate what an op achieved: a
reading above the peak means the time or the peak is wrong, never the bytes.

Standalone (stdlib + torch): shipped beside the harnesses and loaded by path. The micro-benchmarks
run before any candidate code is imported and are cached per host (sandbox/gpu/devices.py), so a
campaign pays for them once per machine and thread count.
"""

from __future__ import annotations

import math
import os
import time

import torch

_perf = time.perf_counter
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _nbytes(xs) -> int:  # type: ignore[no-untyped-def]
    items = xs if isinstance(xs, (list, tuple)) else [xs]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def _load_op_math():  # type: ignore[no-untyped-def]
    """op_math.py, shipped beside this file: loaded by path (the harness imports nothing from
    Arbor) and now, with this module — once the sandbox is locked down, files beside the harness
    can no longer be opened."""
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415

    name = "arbor_harness_op_math"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_math.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


_op_math = _load_op_math()


def _work(model, xs: list) -> tuple[int, dict[str, float]]:  # type: ignore[no-untyped-def]
    """FLOPs and transcendental evaluations of one reference call: the autograd profiler's
    shape-based estimates (matmuls, convolutions, add, mul) and, for the ops it does not estimate,
    ``op_math``'s per-element table (activations, reductions, softmax, norms). Not FlopCounterMode:
    any dispatch mode makes torch import dynamo, two seconds per measurement. Nested ops are counted
    once, at the outermost op either knows (``aten::softmax``, not its ``aten::_softmax``)."""
    from torch.autograd import profiler  # noqa: PLC0415

    math_ = _op_math
    with profiler.profile(with_flops=True, record_shapes=True) as prof:
        model(*xs)

    def counts(e) -> bool:  # type: ignore[no-untyped-def]
        return bool(e.flops) or math_.known(e.name)

    total, fns = 0.0, {}
    for e in prof.function_events:
        parent, counted = e.cpu_parent, False
        while parent is not None and not counted:
            counted, parent = counts(parent), parent.cpu_parent
        if counted or not counts(e):
            continue
        flops, more = math_.op_math(e.name, e.input_shapes, getattr(e, "concrete_inputs", None))
        total += float(e.flops) if e.flops else flops
        math_.add_counts(fns, more)
    return int(total), fns


def reference_cost(model, xs: list, outs) -> dict:  # type: ignore[no-untyped-def]
    """Bytes every implementation must touch (inputs read once, outputs written once; weights not
    counted, which keeps the floor conservative), FLOPs of the reference and its transcendental
    evaluations per function (``transcendentals``: read at the measured vector rates)."""
    why = None
    try:
        flops, fns = _work(model, xs)
    except Exception as exc:  # noqa: BLE001  an op the profiler cannot follow: bytes alone still bound it
        flops, fns, why = None, {}, f"{type(exc).__name__}: {exc}"[:200]
    first = next((t for t in (outs if isinstance(outs, (list, tuple)) else [outs])
                  if isinstance(t, torch.Tensor)), None)
    out = {"bytes": _nbytes(xs) + _nbytes(outs), "flops": flops, "transcendentals": fns or None,
           "dtype": str(first.dtype).replace("torch.", "") if first is not None else None}
    if why:  # the position then reads the memory bound alone, and says why
        out["uncounted"] = why
    return out


# ---- one profiled operator -----------------------------------------------------------------
# Ops that only make a new view of existing storage (or allocate without writing): no bytes move.
NO_DATA = frozenset((
    "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "expand_as",
    "unsqueeze", "squeeze", "select", "slice", "narrow", "detach", "alias", "resolve_conj", "resolve_neg",
    "empty", "empty_like", "empty_strided", "unflatten", "flatten", "contiguous", "to", "type_as", "view_as",
    "lift_fresh", "split", "split_with_sizes", "chunk", "unbind", "broadcast_tensors", "result_type",
    "numpy_T", "mT", "movedim", "swapaxes", "unfold", "diagonal", "real", "imag", "_reshape_alias",
    "item", "_local_scalar_dense", "is_nonzero", "size", "stride", "dim", "set_", "resize_",
))
# Ops that read only part of an input (rows picked by an index): only what they write counts.
PARTIAL_READ = frozenset((
    "index", "index_select", "gather", "take", "take_along_dim", "embedding", "masked_select", "nonzero",
    "narrow_copy", "slice_scatter", "select_scatter", "index_put_", "index_put", "_index_put_impl_",
))
# torch.profiler's ``input_dtypes`` spellings (c10 scalar type names) -> element size.
ELEMENT_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "unsigned short": 2, "unsigned int": 4, "unsigned long": 8,
}


def op_bytes(name: str, shapes: list | None, dtypes: list | None, allocated: int | None,
             default_size: int = 4) -> int:
    """Bytes one call of ``name`` moves at least: its tensor inputs read once plus what it
    allocated (its outputs) written once. Views move nothing; index-style ops count only what they
    write. Non-tensor arguments ('Scalar', 'ScalarList', lists) have no element size and count
    nothing; without dtypes every shaped argument gets ``default_size``."""
    base = name.split("::")[-1].split(".")[0]
    if base in NO_DATA or name.startswith("["):
        return 0
    written = max(0, int(allocated or 0))
    if base in PARTIAL_READ:
        return written
    read = 0
    for i, shape in enumerate(shapes or []):
        if not shape or not all(isinstance(d, int) for d in shape):
            continue  # scalars and non-tensor arguments
        size = ELEMENT_BYTES.get(dtypes[i]) if dtypes and i < len(dtypes) else default_size
        if size:
            read += math.prod(shape) * size
    return read + written


def attribute(own: list[tuple[float, float]], children: list[list[int]]) -> list[tuple[float, float]]:
    """Each event's *self* bytes and FLOPs from their inclusive estimates (``own[i]`` = (bytes,
    flops) of event i as if it did all the work its arguments imply; ``children[i]`` = indices of
    its direct children). A parent keeps only what its children do not account for (never below
    zero), so a chain relu -> clamp_min credits clamp_min, whose self time did the work, and the
    sum over a call tree counts every byte once."""
    out = []
    for i, (b, f) in enumerate(own):
        kb = sum(own[c][0] for c in children[i])
        kf = sum(own[c][1] for c in children[i])
        out.append((max(0.0, b - kb), max(0.0, f - kf)))
    return out


# ---- machine peaks -----------------------------------------------------------------------------
def _best(fn, reps: int, trials: int = 3, clock=_perf) -> float:  # type: ignore[no-untyped-def]
    fn()
    best = float("inf")
    for _ in range(trials):
        t0 = clock()
        for _ in range(reps):
            fn()
        best = min(best, (clock() - t0) / reps)
    return max(best, 1e-9)


def llc_bytes() -> int:
    """Size of the last-level cache one core sees (Linux sysfs); 32 MiB when unknown."""
    root = "/sys/devices/system/cpu/cpu0/cache"
    best = (0, 0)
    try:
        for d in os.listdir(root):
            try:
                level = int(open(os.path.join(root, d, "level")).read().strip())
                text = open(os.path.join(root, d, "size")).read().strip().upper()
            except (OSError, ValueError):
                continue
            mult = {"K": KIB, "M": MIB, "G": GIB}.get(text[-1:], 1)
            size = int(text.rstrip("KMG") or 0) * mult
            best = max(best, (level, size))
    except OSError:
        pass
    return best[1] or 32 * MIB


def footprints(llc: int) -> list[int]:
    """Working-set sizes (bytes moved per call) the bandwidth curve is measured at: one per cache
    level and two well beyond the last-level cache, where only DRAM can serve."""
    big = min(GIB, max(128 * MIB, 8 * llc))
    return sorted({32 * KIB, 256 * KIB, 2 * MIB, max(3 * MIB, llc // 4), max(4 * MIB, llc // 2), 2 * llc, big})


def measure_cpu_peak(threads: int) -> dict:
    """Stream-like bandwidth per working-set size and the GEMM (FMA) rate per dtype, with
    ``threads`` intra-op threads. Bandwidth: the best of copy (2 buffers) and triad
    (``c = b + s*a``, 3 buffers) at each footprint, bytes counted as each kernel must move them;
    the largest footprint is the DRAM stream rate (``bytes_per_s``). The highest rates are wanted:
    a floor derived from them never flags an honest candidate, and a profile read against them
    never shows an op above 100%. One thread is timed on its own CPU time, as the harness times
    one-thread work (other processes' load would otherwise stretch the peak's time but not the
    measurement's, and a reference would read above its speed of light); more threads on wall time.
    ``vector``: each transcendental's evaluation rate (``measure_vector_rates``)."""
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    clock = time.thread_time if threads <= 1 else _perf
    try:
        llc = llc_bytes()
        curve = []
        for fp in footprints(llc):
            reps = max(1, min(1000, int(5e8 // fp)))
            a = torch.ones(fp // 8)
            b = torch.empty_like(a)
            rate = 2 * a.numel() * 4 / _best(lambda: b.copy_(a), reps, clock=clock)
            del a, b
            x = torch.ones(fp // 12)
            y, z = torch.ones_like(x), torch.empty_like(x)
            rate = max(rate, 3 * x.numel() * 4 / _best(lambda: torch.add(y, x, alpha=3.0, out=z), reps, clock=clock))
            del x, y, z
            curve.append([fp, rate])
        flops = {}
        for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
            best = 0.0
            for n, reps in ((256, 8), (512, 2)):  # five trials: one slowed by a neighbour is not the peak
                m = torch.randn(n, n).to(dtype)
                best = max(best, 2 * n ** 3 / _best(lambda: torch.mm(m, m), reps, trials=5, clock=clock))
            flops[name] = best
        vector = measure_vector_rates(threads, clock)
    finally:
        torch.set_num_threads(old)
    return {"threads": threads, "bandwidth": curve, "bytes_per_s": curve[-1][1], "llc_bytes": llc,
            "flops": flops, "flops_per_s": max(flops.values()), "vector": vector, "source": "measured"}


# The probe's operands: positive where the function needs it (log, sqrt, pow), an exponent that
# is not an integer (pow's general path), a divisor away from zero.
_VECTOR_FNS = {
    "exp": lambda a, b, o: torch.exp(a, out=o), "log": lambda a, b, o: torch.log(a, out=o),
    "erf": lambda a, b, o: torch.erf(a, out=o), "tanh": lambda a, b, o: torch.tanh(a, out=o),
    "sigmoid": lambda a, b, o: torch.sigmoid(a, out=o), "pow": lambda a, b, o: torch.pow(a, 2.5, out=o),
    "sqrt": lambda a, b, o: torch.sqrt(a, out=o), "div": lambda a, b, o: torch.div(a, b, out=o),
}


def measure_vector_rates(threads: int, clock=_perf) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Evaluations per second of each transcendental (``op_math.TRANSCENDENTALS``) at ``threads``
    intra-op threads, as ATen's vectorized float32 kernels reach them on cache-resident operands
    (32K elements a thread: no DRAM traffic), net of an in-cache copy's time — the load and store a
    fused kernel would not pay again for each function it evaluates. The net is floored at half the
    function's time, so a copy timed slow never makes a rate absurdly high."""
    n = 32768 * max(1, threads)
    a = torch.rand(n) + 0.5
    b, o = torch.rand(n) + 0.5, torch.empty(n)
    reps = 40  # about 0.3 s for the eight functions on one thread
    copy = _best(lambda: o.copy_(a), reps, clock=clock)
    rates = {}
    for fn, call in _VECTOR_FNS.items():
        t = _best(lambda: call(a, b, o), reps, clock=clock)
        rates[fn] = n / max(t - copy, 0.5 * t)
    return rates


def measure_gpu_peak(device) -> dict | None:  # type: ignore[no-untyped-def]
    """A quick measured copy bandwidth and GEMM rate (float32 without TF32, bfloat16) on a CUDA
    device, timed with CUDA events: what this board reaches in practice, beside its datasheet row.
    None when it cannot be measured (too little free memory, no CUDA)."""
    try:
        dev = torch.device(device)
        name = torch.cuda.get_device_name(dev)

        def timed(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
            fn()
            torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            best = float("inf")
            for _ in range(3):
                start.record()
                for _ in range(reps):
                    fn()
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) / 1e3 / reps)
            return max(best, 1e-9)

        n = 64 * MIB  # float32 elements: 256 MiB per buffer, far beyond any L2
        a = torch.ones(n, device=dev)
        b = torch.empty_like(a)
        bw = 2 * n * 4 / timed(lambda: b.copy_(a), 10)
        del a, b
        flops = {}
        for dtype, name_, size in ((torch.float32, "float32", 4096), (torch.bfloat16, "bfloat16", 8192)):
            m = torch.randn(size, size, device=dev).to(dtype)
            flops[name_] = 2 * size ** 3 / timed(lambda: torch.mm(m, m), 5)
            del m
        flops["float16"] = flops["bfloat16"]
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a peak is advice for reports; the table still bounds the floor
        return None
    return {"name": name, "bytes_per_s": bw, "flops": flops, "flops_per_s": max(flops.values()),
            "source": "measured"}


def measure_missing_peaks(req, facts: dict, fp: dict, device) -> None:  # type: ignore[no-untyped-def]
    """The peaks the kernel harness's request did not bring from the host's cache, into ``facts``
    (``fp``: the job's fingerprint): on CPU every allowed core's (the Critic's floor) and the
    campaign threads' (its speed-of-light position), one measurement when the two are the same; on
    a GPU the board's measured rates, again when the cached ones are another board's. Measured
    before the candidate exists: nothing it does can touch them."""
    if device.type == "cuda":
        sol = facts.get("sol_peak") or {}
        if req.measure_sol_peak and sol.get("name") != torch.cuda.get_device_name(device):
            facts["sol_peak"] = measure_gpu_peak(device)
        return
    cores = int(fp.get("cpu_affinity") or 1)
    threads = int(req.num_threads or cores)
    if not facts.get("peak") and req.measure_peak:
        facts["peak"] = measure_cpu_peak(cores)
    if not facts.get("sol_peak") and req.measure_sol_peak:
        same = facts.get("peak") and facts["peak"].get("threads") == threads
        facts["sol_peak"] = facts["peak"] if same else measure_cpu_peak(threads)
