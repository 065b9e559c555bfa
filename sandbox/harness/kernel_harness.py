"""Arbor kernel harness: correctness on every seed, then interleaved A/B timing, in one process.

Run as ``python -I -B kernel_harness.py request.json`` inside a throw-away workdir; writes
``result.json`` there. STANDALONE on purpose (stdlib + torch + numpy only, never ``import arbor``):
it is shipped into the sandbox as files, so it must work where Arbor is not installed (containers).
Its helper modules (kernel_checks, problem_sizes, integrity, timing, calibration, clock_watch, cost,
fingerprint, correctness, placement, compile_cache) and its import and timed phases (import_phase,
timed_phase) are loaded by path before any candidate code runs, and every defence against the
reward hacks of docs/integrity.md#reward-hacks that needs the live tensors lives here or in them;
the Critic re-derives every statistic from the raw samples.

A failing candidate is data, not a crash: exit status 0 whenever result.json describes the outcome.
result.json is rewritten at every phase boundary, so a killed run still says how far it got.

Its start-up (allocator, torch, helpers) is ``warm()``; ``main(argv)`` runs it first. The local
runner usually calls ``main`` in a child forked from a worker that already ran ``warm()`` once
(sandbox/runners/warm_worker.py): then the child starts measuring at once. ``phase_times`` says where each
measurement's time went.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import sys
import time
import traceback

_TEXT_LIMIT = 4000
_RESULT = "result.json"
_HERE = os.path.dirname(os.path.abspath(__file__))
checks = sizes = integrity = timing = cost = fpr = correctness = calibration = clock_watch = placement = None  # warm()
import_phase = timed_phase = None  # the phases kept in their own files, loaded by path in warm() too
compile_cache = None  # also: stdlib only; a job activates its cache before the candidate imports Inductor
Failure = Exception  # kernel_checks.Failure once loaded
_MODES: dict = {}  # torch dtype -> precision mode name, filled in warm() once torch is imported
_WARM: dict = {}  # what warm() prepared: torch and what its import cost this process


def _tail(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def _is_oom(exc: BaseException) -> bool:
    oom = ("out of memory", "can't allocate memory", "bad_alloc")
    return isinstance(exc, MemoryError) or any(s in str(exc).lower() for s in oom)


def _format_exc(exc: BaseException) -> str:
    """The traceback minus harness and nn.Module plumbing frames, workdir paths stripped, so the
    same candidate error always reads the same (agents read this text; diagnoses group by it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    kept = [f for f in frames if os.path.dirname(os.path.abspath(f.filename)) != _HERE
            and "torch/nn/modules/module.py" not in f.filename] or frames
    text = "".join(["Traceback (most recent call last):\n", *traceback.format_list(kept),
                    *traceback.format_exception_only(type(exc), exc)])
    return text.replace(os.getcwd() + os.sep, "")


def classify(exc: BaseException, default: str, what: str) -> Exception:
    return Failure("oom" if _is_oom(exc) else default, _tail(f"{what}{checks.triton_hint(exc)}\n{_format_exc(exc)}"))


def _write_result(result: dict) -> None:
    """Atomic write so a kill mid-write never leaves half a JSON document."""
    with open(_RESULT + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, allow_nan=False, default=str)
    os.replace(_RESULT + ".tmp", _RESULT)


def load_module(name: str, path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Harness:
    """One measurement: build both models, check every seed, time A/B interleaved, re-check."""

    def __init__(self, req, torch) -> None:  # type: ignore[no-untyped-def]
        self.req, self.torch = req, torch
        self.device = torch.device(req.device or "cpu")
        self.cuda = self.device.type == "cuda"
        dt = req.dtype
        self.dtype = getattr(torch, dt, None) if dt else None
        if dt and self.dtype not in _MODES:
            raise Failure("harness_error", f"unknown dtype {dt!r}: use float32, float16 or bfloat16")
        # The precision mode (docs/campaigns.md#precision): the dtype inputs and parameters are
        # cast to; without a cast, fp32's rules. It sets the floating-point outputs' tolerance and
        # which precision switches the candidate may set (never below the mode's own precision).
        self.precision = _MODES[self.dtype] if self.dtype is not None else "fp32"
        self.mode_tol = checks.DTYPE_TOLERANCE[self.dtype] if self.dtype is not None else None
        self.seeds = [int(s) for s in req.seeds or [0]]
        self.aa = req.mode == "aa"
        self.seed_fn, self.sync = torch.manual_seed, getattr(torch.cuda, "synchronize", None)
        self.l2 = integrity.CudaL2() if self.cuda else None
        self.identities = self.audit = self.state0 = self.pristine = None
        self.ref_codes: set = set()
        self.close_fraction = float(req.close_fraction)
        self.checker = correctness.Correctness(self, checks, integrity)
        self.facts: dict = {"inner_by_side": [0, 0]}
        self.first_calls = compile_cache.FirstCalls()  # compile time, apart from the timed samples
        self.facts["first_call_s"] = self.first_calls.seconds
        self.result: dict = {
            "status": "running", "phase": "import", "error_class": None, "error_text": None,
            "correctness": [], "recheck": None, "baseline_samples": [], "candidate_samples": [],
            "inner": 0, "fingerprint": {}, "phase_times": {}, "input_shapes": None,
            "sizes_applied": {}, "warnings": [], "nonce": req.nonce, "stats": self.facts,
        }

    def checkpoint(self, phase: str) -> None:
        self.result["phase"] = phase
        _write_result(self.result)

    @contextlib.contextmanager
    def timed(self, name: str):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.result["phase_times"][name] = time.perf_counter() - t0

    def inputs(self, seed: int) -> list:
        """Fresh inputs for ``seed`` (KernelBench: manual_seed, then get_inputs), cast and moved."""
        torch = self.torch
        self.seed_fn(seed)
        out = []
        for x in self.problem.get_inputs():
            if isinstance(x, torch.Tensor):
                floating = self.dtype is not None and x.is_floating_point()
                x = x.to(self.device, self.dtype) if floating else x.to(self.device)
            out.append(x)
        return out

    def clone(self, xs: list) -> list:
        return [x.clone() if isinstance(x, self.torch.Tensor) else x for x in xs]

    def compare(self, ref, new) -> dict:  # type: ignore[no-untyped-def]
        r = self.req
        return checks.compare(ref, new, r.atol, r.rtol, self.close_fraction,
                              float(r.outlier_factor), self.mode_tol)

    def build(self) -> None:
        """Both models built, the reference run once before the candidate is imported (``import_phase.py``)."""
        import_phase.build(self, sys.modules[__name__])

    def to_device(self, m):  # type: ignore[no-untyped-def]
        ok = isinstance(m, self.torch.nn.Module)
        return (m.to(self.device, self.dtype) if self.dtype else m.to(self.device)) if ok else m

    def snapshot(self) -> None:
        """Taken immediately before candidate code is imported (reward hacks #5, #7, #8, #11)."""
        extra = {"harness": sys.modules[__name__], "Harness": Harness, "problem": self.problem,
                 "Model": self.problem.Model}
        extra.update({m.__name__: m for m in (checks, sizes, integrity, timing, cost, fpr, correctness, calibration,
                                              clock_watch, compile_cache, compile_cache.extension_cache, placement,
                                              import_phase, timed_phase)})
        extra["Correctness"] = correctness.Correctness
        extra.update(integrity.reference_spaces(self.ref, self.problem))
        self.identities = integrity.IdentitySnapshot(extra)
        self.state0 = integrity.global_state()
        self.pristine = integrity.pstate.StateGuard()  # every reference call runs under it
        self.audit = integrity.ProcessAudit()
        self.l2_limit0 = self.l2.limit() if self.l2 else None

    def verify(self) -> None:
        """Nothing the harness relies on may have been replaced or switched since the snapshot."""
        integrity.verify(self, Failure)

    def as_reference(self, is_new: bool):  # type: ignore[no-untyped-def]
        """The reference never runs under process-wide state the candidate set (process_state)."""
        return contextlib.nullcontext() if is_new or self.pristine is None else self.pristine.reference()

    def call(self, is_new: bool, xs: list):  # type: ignore[no-untyped-def]
        try:
            t0 = self.first_calls.start(is_new)
            with self.as_reference(is_new):
                out = (self.new if is_new else self.ref)(*xs)
            if self.cuda:
                self.sync()
            self.first_calls.stop(is_new, t0)
            return out
        except BaseException as e:
            if is_new:
                raise classify(e, "runtime_error", "the candidate raised during forward:")
            raise classify(e, "harness_error", "the reference Model raised during forward:")

    def timing(self) -> None:
        """The timed phase: calibration, then ABBA-interleaved rounds (``timed_phase.py``)."""
        timed_phase.run(self, sys.modules[__name__])

    def run(self) -> None:
        torch, req = self.torch, self.req
        if req.num_threads:
            torch.set_num_threads(int(req.num_threads))
        with self.timed("device"):  # on CUDA: the context (a forked child creates its own here)
            self.result["fingerprint"] = fp = fpr.fingerprint(str(self.device))
            fp["precision"] = self.precision  # every result names the precision mode it was measured in
            if self.cuda:
                torch.empty(1, device=self.device)  # create the context the L2 controls act on
                self.l2.reset()
        self.facts["peak"], self.facts["sol_peak"] = req.peak, req.sol_peak
        with self.timed("peak"):  # before the candidate exists: nothing it does can touch them
            cost.measure_missing_peaks(self.req, self.facts, fp, self.device)
        self.checkpoint("import")
        with torch.no_grad():
            with self.timed("import"):
                self.build()
            self.checkpoint("correctness")
            with self.timed("correctness"):
                self.checker.run()
            with self.timed("timing"):
                if self.cuda:  # after warm-up and correctness: the GPU is at its working clocks
                    fp["gpu_state_start"] = fpr.gpu_state(str(self.device))
                self.timing()
                self.checkpoint("recheck")
                with self.timed("recheck"):
                    self.checker.recheck(self.pools[1])
            self.verify()
        self.result.update(status="ok", phase="done")


def measure(req, result_path: str, torch, started: float, warm_s: dict,  # type: ignore[no-untyped-def]
            cache=None) -> int:
    """One measurement, written to ``result_path``; the exit code says whether the harness held.
    ``started``: when this process began working on it (perf_counter); ``warm_s``: what warm()
    cost this process (zero in a child of a warm worker); ``cache``: the job's compile cache
    (compile_cache.JobCache), packed for the host at the end."""
    global _RESULT
    _RESULT = result_path
    result = {"status": "error", "phase": "start", "error_class": "harness_error",
              "error_text": None, "nonce": req.nonce}
    rc = 0
    try:
        harness = Harness(req, torch)
        result = harness.result
        result["phase_times"].update(warm_s)
        harness.run()
    except BaseException as e:  # noqa: BLE001  a harness bug (or a candidate escaping our guards)
        if isinstance(e, checks.Failure):
            result.update(status="error", error_class=e.error_class, error_text=_tail(e.text),
                          baseline_samples=[], candidate_samples=[])
        else:
            oom = _is_oom(e)
            result.update(status="error", error_class="oom" if oom else "harness_error",
                          error_text=_tail(_format_exc(e)), baseline_samples=[], candidate_samples=[])
            rc = 0 if oom else 1
    if isinstance(result.get("phase_times"), dict):
        result["phase_times"]["harness"] = time.perf_counter() - started  # all of it, as this process saw it
    if cache is not None:
        result.setdefault("stats", {})["compile_cache"] = cache.save()
    _write_result(result)
    return rc


def warm() -> dict:
    """Everything main() does before it reads a request, once per process: pin the host allocator
    (before torch), import torch, load the helper modules (and what they load lazily). Returns what
    this call cost ({} when already done). A warm worker (sandbox/runners/warm_worker.py) calls it once and
    forks a child per measurement, which then finds nothing left to do here. Runs no tensor op:
    a forked child must be able to start its own OpenMP pool and device context."""
    global checks, sizes, integrity, timing, cost, fpr, correctness, calibration, clock_watch, compile_cache, placement
    global import_phase, timed_phase, Failure
    if _WARM:
        return {}
    t0 = time.perf_counter()
    load_module("arbor_harness_allocator", os.path.join(_HERE, "allocator.py")).pin()  # before torch
    import torch  # noqa: PLC0415  (imported here so a missing torch is reported as data)

    t1 = time.perf_counter()
    (checks, sizes, integrity, timing, cost, fpr, correctness, calibration, clock_watch, compile_cache, placement,
     import_phase, timed_phase) = (
        load_module(f"arbor_harness_{n}", os.path.join(_HERE, f"{f}.py")) for n, f in
        (("checks", "kernel_checks"), ("sizes", "problem_sizes"), ("integrity", "integrity"), ("timing", "timing"),
         ("cost", "cost"), ("fingerprint", "fingerprint"), ("correctness", "correctness"),
         ("calibration", "calibration"), ("clock_watch", "clock_watch"), ("compile_cache", "compile_cache"),
         ("placement", "placement"), ("import_phase", "import_phase"), ("timed_phase", "timed_phase")))
    Failure = checks.Failure
    _MODES.update({torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"})
    integrity._sibling("liveness")  # correctness loads it on first use
    from torch.autograd import profiler  # noqa: F401,PLC0415  cost's FLOP count imports it on first use

    # torch's ~170k module-level objects never become garbage: out of the collector's sight, a full
    # collection during a measurement (a snapshot, a timed sample) costs milliseconds, not 0.3 s,
    # and a warm worker's forked children share those pages instead of copying them
    gc.freeze()
    _WARM["torch"] = torch
    return {"torch_import": t1 - t0, "harness_modules": time.perf_counter() - t1}


def warm_compiler() -> dict:
    """The warm worker's ``compiler`` extra (``PythonEntry.extras``), run before the first job of a
    candidate that calls ``torch.compile``: Dynamo, AOT autograd and Inductor imported and their
    per-process keys computed once (``compiler_warm.py``: ~2.5 s of a cached compiled job's 5 s),
    with whatever the imports captured of the worker's folders recorded for ``after_fork``."""
    if "compiler" in _WARM:
        return {}
    warm()
    warmed = load_module("arbor_harness_compiler_warm", os.path.join(_HERE, "compiler_warm.py")).warm(_WARM["torch"])
    _WARM["compiler"] = warmed
    return {"compiler_import": warmed.seconds, "rebound_globals": len(warmed.leaks)}


def after_fork() -> None:
    """In every child the warm worker forks (whichever script it then runs), once the job's
    environment is set: module globals the compiler's import computed from the worker's temp and
    home folders get the job's (``compiler_warm.Warmed.rebind``)."""
    if "compiler" in _WARM:
        _WARM["compiler"].rebind()


def main(argv: list[str]) -> int:
    """``request.json`` holds one request, or ``{"batch": [request, ...]}`` for several."""
    global _HERE, _RESULT
    started = time.perf_counter()
    _HERE = os.path.dirname(os.path.abspath(__file__))  # a warm worker's child: the job's workdir
    if len(argv) != 2:
        return print("usage: python -I -B kernel_harness.py request.json", file=sys.stderr) or 2
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    os.remove(argv[1])  # the nonces inside must not be readable by the candidate from disk
    wire = load_module("arbor_harness_request", os.path.join(_HERE, "request.py"))
    try:
        req = wire.read_measure(text)  # strict: an unknown or missing field is named, never defaulted
    except (ValueError, TypeError) as e:
        return print(f"request.json: {e}", file=sys.stderr) or 2
    entries = req if isinstance(req, list) else None
    cache = None
    try:
        warm_s = {"torch_import": 0.0, "harness_modules": 0.0, **warm()}
        torch = _WARM["torch"]
        if entries is None:  # one measurement: its candidate's compiled artifacts travel with the job
            cache = compile_cache.JobCache.start(req)  # warm() imported torch alone: no Inductor yet
        if entries is not None:  # each measured in a forked child (batch.py)
            def child(r, path: str) -> int:  # in the forked child: Inductor's settings are its own
                compile_cache.settle(r.inductor)
                return measure(r, path, torch, time.perf_counter(), warm_s)

            return load_module("arbor_harness_batch", os.path.join(_HERE, "batch.py")).run(entries, child)
    except BaseException as e:  # noqa: BLE001  torch or a helper missing: report it as data
        for i, r in enumerate(entries if entries is not None else [req]):
            _RESULT = f"result-{i}.json" if entries is not None else "result.json"
            _write_result({"status": "error", "phase": "start", "error_class": "harness_error",
                           "error_text": _tail(_format_exc(e)), "nonce": r.nonce})
        return 1
    return measure(req, "result.json", torch, started, warm_s, cache)


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush(), sys.stderr.flush()
    # Skip interpreter shutdown: a candidate's non-daemon threads or atexit hooks must not turn a
    os._exit(code)  # finished measurement into a timeout (they are reported by the process audit)
