"""Arbor kernel harness: correctness on every seed, then interleaved A/B timing, in one process.

Run as ``python -I -B kernel_harness.py request.json`` inside a throw-away workdir; writes
``result.json`` there. STANDALONE on purpose (stdlib + torch + numpy only, never ``import arbor``):
it is shipped into the sandbox as a file, so it must work where Arbor is not installed (containers).

A failing candidate is data, not a crash: the exit status is 0 whenever result.json describes the
outcome; non-zero only when the harness itself is broken. result.json is also rewritten at every
phase boundary (status "running"), so a run killed by the wall-clock limit still says how far it got.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import sys
import threading
import time
import traceback

# Captured before any candidate code runs: a candidate that monkey-patches these (a known reward
# hack) changes the module attributes, not our references, and is reported in "warnings".
_perf_counter_ns = time.perf_counter_ns
_TEXT_LIMIT = 4000
_POOL_SIZE = 3  # distinct input sets rotated per sample: fresh pointers defeat pointer-keyed caches
_FLUSH_BYTES = 256 << 20  # larger than any current L2
_CUDA_MAX_INNER = 64  # on CUDA each call has its own event pair after a flush; inner only averages
_RESULT = "result.json"
_HERE = os.path.dirname(os.path.abspath(__file__))
checks = None  # kernel_checks.py, shipped beside this file; loaded by path before any candidate code


class Failure(Exception):
    """A classified failure: compile_error, runtime_error, oom, incorrect or harness_error."""

    def __init__(self, error_class: str, text: str) -> None:
        super().__init__(text)
        self.error_class, self.text = error_class, text


def _tail(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def _is_oom(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, MemoryError) or any(
        s in msg for s in ("out of memory", "can't allocate memory", "bad_alloc"))


def _format_exc(exc: BaseException) -> str:
    """The traceback minus harness and nn.Module plumbing frames, workdir paths stripped, so the
    same candidate error always reads the same (agents read this text; diagnoses group by it)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = {os.path.join(_HERE, n) for n in ("kernel_harness.py", "kernel_checks.py")}
    kept = [f for f in frames if os.path.abspath(f.filename) not in ours
            and "torch/nn/modules/module.py" not in f.filename] or frames
    text = "".join(["Traceback (most recent call last):\n", *traceback.format_list(kept),
                    *traceback.format_exception_only(type(exc), exc)])
    return text.replace(os.getcwd() + os.sep, "")


def _classify(exc: BaseException, default: str, what: str) -> Failure:
    return Failure("oom" if _is_oom(exc) else default, _tail(f"{what}\n{_format_exc(exc)}"))


def _write_result(result: dict) -> None:
    """Atomic write so a kill mid-write never leaves half a JSON document."""
    with open(_RESULT + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f, allow_nan=False, default=str)
    os.replace(_RESULT + ".tmp", _RESULT)


def _load_module(name: str, path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Harness:
    """One measurement: build both models, check every seed, time A/B interleaved, re-check."""

    def __init__(self, req: dict, torch) -> None:  # type: ignore[no-untyped-def]
        self.req, self.torch = req, torch
        self.device = torch.device(req.get("device") or "cpu")
        self.cuda = self.device.type == "cuda"
        dt = req.get("dtype")
        self.dtype = getattr(torch, dt, None) if dt else None
        if dt and not isinstance(self.dtype, torch.dtype):
            raise Failure("harness_error", f"unknown dtype {dt!r}: use float32, float16 or bfloat16")
        self.seeds = [int(s) for s in req.get("seeds") or [0]]
        self.identities: dict | None = None
        self.threads_before = 0
        self.result: dict = {
            "status": "running", "phase": "import", "error_class": None, "error_text": None,
            "correctness": [], "recheck": None, "baseline_samples": [], "candidate_samples": [],
            "inner": 0, "fingerprint": {}, "phase_times": {}, "input_shapes": None,
            "sizes_applied": {}, "warnings": [], "nonce": req.get("nonce"),
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
        torch.manual_seed(seed)
        out = []
        for x in self.problem.get_inputs():
            if isinstance(x, torch.Tensor):
                floating = self.dtype is not None and x.is_floating_point()
                x = x.to(self.device, self.dtype) if floating else x.to(self.device)
            out.append(x)
        return out

    def clone(self, xs: list) -> list:
        return [x.clone() if isinstance(x, self.torch.Tensor) else x for x in xs]

    def build(self) -> None:
        """Same seed before get_init_inputs, Model and ModelNew, so their parameters match."""
        req, torch, seed = self.req, self.torch, self.seeds[0]
        try:
            self.problem = _load_module("arbor_problem", req["problem_file"])
            self.result["sizes_applied"] = checks.apply_sizes(
                self.problem, req.get("sizes") or {}, req.get("size_scale"))
            torch.manual_seed(seed)
            init = list(self.problem.get_init_inputs())
            torch.manual_seed(seed)
            self.ref = self.problem.Model(*init)
        except checks.SizeError as e:
            raise Failure("harness_error", str(e)) from None
        except BaseException as e:
            raise _classify(e, "harness_error", "the reference problem failed to load/build:")
        self.identities = self._identities()
        self.threads_before = threading.active_count()
        self.checkpoint("candidate_import")
        new_cls = self.problem.Model  # mode "aa": the reference against itself (noise floor)
        if req.get("mode", "ab") != "aa":
            try:
                new_cls = getattr(_load_module("arbor_candidate", req["candidate_file"]),
                                  "ModelNew", None)
            except BaseException as e:
                raise _classify(e, "compile_error", "the candidate failed to compile/import:")
            if not isinstance(new_cls, type):
                raise Failure("compile_error", "the candidate defines no `class ModelNew` (a "
                              "KernelBench solution must define ModelNew with Model's constructor)")
        try:
            torch.manual_seed(seed)
            self.new = new_cls(*init)
        except BaseException as e:
            raise _classify(e, "runtime_error", "ModelNew(*get_init_inputs()) raised:")
        for attr in ("ref", "new"):
            m = getattr(self, attr)
            if isinstance(m, torch.nn.Module):
                setattr(self, attr, m.to(self.device, self.dtype) if self.dtype else m.to(self.device))

    def call(self, is_new: bool, xs: list):  # type: ignore[no-untyped-def]
        try:
            out = (self.new if is_new else self.ref)(*xs)
            if self.cuda:
                self.torch.cuda.synchronize()
            return out
        except BaseException as e:
            if is_new:
                raise _classify(e, "runtime_error", "the candidate raised during forward:")
            raise _classify(e, "harness_error", "the reference Model raised during forward:")

    def check(self, seed: int, candidate_first: bool) -> dict:
        """Each model gets its own clone; running the candidate first (alternately) means it cannot
        pick up an answer from memory the reference just freed."""
        xs = self.inputs(seed)
        order = (True, False) if candidate_first else (False, True)
        outs = {is_new: self.call(is_new, self.clone(xs)) for is_new in order}
        return {"seed": seed, **checks.compare(outs[False], outs[True],
                                        self.req["atol"], self.req["rtol"])}

    def correctness(self) -> None:
        torch = self.torch
        xs = self.inputs(self.seeds[0])
        self.result["input_shapes"] = [list(x.shape) if isinstance(x, torch.Tensor) else None
                                       for x in xs]
        ref = self.call(False, self.clone(xs))
        first = ref[0] if isinstance(ref, (tuple, list)) and ref else ref
        if isinstance(first, torch.Tensor) and first.numel() > 1 and bool(first.min() == first.max()):
            self.result["warnings"].append("reference output is constant for seed "
                                           f"{self.seeds[0]}: a constant candidate would pass")
        for i, seed in enumerate(self.seeds):
            self.result["correctness"].append(self.check(seed, candidate_first=(i % 2 == 0)))
            self.checkpoint("correctness")
        bad = [c for c in self.result["correctness"] if not c["ok"]]
        if bad:
            raise Failure("incorrect", _tail("\n".join(
                f"seed {c['seed']}: {c['reason']} (max_abs_err={c['max_abs_err']}, "
                f"max_rel_err={c['max_rel_err']})" for c in bad)))

    def _sample_cpu(self, model, xs: list, inner: int) -> float:  # type: ignore[no-untyped-def]
        t0 = _perf_counter_ns()
        for _ in range(inner):
            model(*xs)
        return (_perf_counter_ns() - t0) / 1e9 / inner

    def _sample_cuda(self, model, xs: list, inner: int) -> float:  # type: ignore[no-untyped-def]
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(inner)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(inner)]
        torch.cuda.synchronize()
        for i in range(inner):
            self.flush.zero_()  # L2 flush, same stream, outside the timed region
            starts[i].record()
            model(*xs)
            ends[i].record()
        torch.cuda.synchronize()  # the whole device: work hidden on a side stream must finish too
        return sum(s.elapsed_time(e) for s, e in zip(starts, ends)) / 1e3 / inner

    def sample(self, side: int, xs: list, inner: int) -> float:
        fn = self._sample_cuda if self.cuda else self._sample_cpu
        try:
            return fn(self.new if side else self.ref, xs, inner)
        except BaseException as e:
            if side:
                raise _classify(e, "runtime_error", "the candidate raised during timing:")
            raise _classify(e, "harness_error", "the reference Model raised during timing:")

    def timing(self) -> None:
        """Warm-up by time, calibrate ``inner``, then ABBA-interleaved rounds within the budget."""
        req, torch = self.req, self.torch
        min_rep, max_rep = int(req["min_repeats"]), int(req["max_repeats"])
        if self.cuda:
            self.flush = torch.empty(_FLUSH_BYTES, dtype=torch.uint8, device=self.device)
        # Each side owns its inputs, so an input-mutating candidate cannot disturb the baseline.
        pools = [[self.inputs(10_007 + k) for k in range(_POOL_SIZE)] for _side in (0, 1)]
        per_call = []
        for side in (0, 1):
            durations: list[float] = []
            t_end = _perf_counter_ns() + float(req["warmup_s"]) * 1e9
            while not durations or _perf_counter_ns() < t_end:
                durations.append(self.sample(side, pools[side][len(durations) % _POOL_SIZE], 1))
            steady = sorted(durations[1:] or durations)  # the first call pays for lazy init
            per_call.append(max(steady[len(steady) // 2], 1e-9))
        # Same inner for both sides, sized so the faster side's sample lasts >= min_sample_s.
        inner = max(1, math.ceil(float(req["min_sample_s"]) / min(per_call)))
        self.result["inner"] = inner = min(inner, _CUDA_MAX_INNER if self.cuda else 1_000_000)
        self.checkpoint("timing")
        samples = (self.result["baseline_samples"], self.result["candidate_samples"])
        t_end, rnd = _perf_counter_ns() + float(req["time_budget_s"]) * 1e9, 0
        while rnd < max_rep and (rnd < min_rep or _perf_counter_ns() < t_end):
            for side in ((0, 1) if rnd % 2 == 0 else (1, 0)):  # ABBA: linear drift hits both
                samples[side].append(self.sample(side, pools[side][rnd % _POOL_SIZE], inner))
            rnd += 1

    def recheck(self) -> None:
        """Outputs corrupted only after warm-up are a known hack: validate once more."""
        entry = self.check(self.seeds[0], candidate_first=True)
        self.result["recheck"] = entry
        if not entry["ok"]:
            raise Failure("incorrect", f"output changed after timing (seed {entry['seed']}): "
                          f"{entry['reason']}")

    def _identities(self) -> dict:
        torch = self.torch
        ids = {"time.perf_counter_ns": time.perf_counter_ns, "time.perf_counter": time.perf_counter,
               "torch.allclose": torch.allclose, "torch.manual_seed": torch.manual_seed}
        if self.cuda:
            ids.update({"torch.cuda.synchronize": torch.cuda.synchronize,
                        "torch.cuda.Event": torch.cuda.Event})
        return ids

    def audit(self) -> None:
        """Report (once) tampering with timers/checkers and threads the candidate left running."""
        if self.identities is None:
            return
        now, warnings = self._identities(), self.result["warnings"]
        warnings.extend(f"candidate replaced {k}" for k, fn in self.identities.items()
                        if now.get(k) is not fn)
        grown = threading.active_count() - self.threads_before
        if grown > 0:
            warnings.append(f"candidate left {grown} extra Python thread(s) running")
        self.identities = None

    def run(self) -> None:
        torch = self.torch
        if self.req.get("num_threads"):
            torch.set_num_threads(int(self.req["num_threads"]))
        self.result["fingerprint"] = checks.fingerprint(str(self.device))
        self.checkpoint("import")
        with torch.no_grad():
            with self.timed("import"):
                self.build()
            self.checkpoint("correctness")
            with self.timed("correctness"):
                self.correctness()
            with self.timed("timing"):
                self.timing()
                self.checkpoint("recheck")
                self.recheck()
        self.audit()
        self.result.update(status="ok", phase="done")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -I -B kernel_harness.py request.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        req = json.load(f)
    os.remove(argv[1])  # the nonce inside must not be readable by the candidate from disk
    result = {"status": "error", "phase": "start", "error_class": "harness_error",
              "error_text": None, "nonce": req.get("nonce")}
    harness, rc = None, 0
    try:
        t0 = time.perf_counter()
        import torch  # noqa: PLC0415  (imported here so a missing torch is reported as data)

        torch_import_s = time.perf_counter() - t0
        global checks
        checks = _load_module("arbor_kernel_checks", os.path.join(_HERE, "kernel_checks.py"))
        harness = Harness(req, torch)
        result = harness.result
        result["phase_times"]["torch_import"] = torch_import_s
        harness.run()
    except Failure as e:
        if harness is not None:
            harness.audit()
        result.update(status="error", error_class=e.error_class, error_text=_tail(e.text),
                      baseline_samples=[], candidate_samples=[])
    except BaseException as e:  # noqa: BLE001  a harness bug (or a candidate escaping our guards)
        oom = _is_oom(e)
        result.update(status="error", error_class="oom" if oom else "harness_error",
                      error_text=_tail(_format_exc(e)), baseline_samples=[], candidate_samples=[])
        rc = 0 if oom else 1
    _write_result(result)
    return rc


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter shutdown: a candidate's non-daemon threads or atexit hooks must not turn a
    # finished measurement into a timeout (they are already reported in "warnings").
    os._exit(code)
