"""Kernel measurement protocol: ship problem + candidate + harness into a runner, parse the verdict.

The heavy lifting (correctness, interleaved timing) happens in ``harness/kernel_harness.py`` inside
the sandboxed child; this module only builds the job and turns *every* way the child can end
(clean result, partial result, killed, timed out, garbage) into one ``KernelMeasurement`` with a
diagnosis class the Critic and the tree understand. It never raises for a bad candidate.
"""

from __future__ import annotations

import ast
import json
import secrets
import signal
import sys
from dataclasses import asdict, replace
from pathlib import Path

from arbor.sandbox.kernel import vec_isa
from arbor.sandbox.kernel.compile_store import (ARCHIVE_IN, ARCHIVE_OUT, CompileCache, default_cache, lookup,
                                                uses_compiler, uses_dynamo)
from arbor.sandbox.gpu import check_identity
from arbor.sandbox.harness.request import MeasureRequest, write_batch
from arbor.sandbox.kernel.peaks import check_peaks, keep_peaks, with_peaks
from arbor.sandbox.kernel.values import ERROR_CLASSES, KernelMeasurement, KernelRequest
from arbor.sandbox.runner import Job, JobResult, PythonEntry, Runner

__all__ = ["KernelRequest", "KernelMeasurement", "measure_kernel", "measure_kernels", "prewarm", "HARNESS_PATH",
           "ERROR_CLASSES"]

HARNESS_PATH = Path(__file__).parents[1] / "harness" / "kernel_harness.py"
# Shipped beside the harness and loaded by path in the child (never imported from Arbor there).
HARNESS_MODULES = ("kernel_checks.py", "problem_sizes.py", "integrity.py", "process_state.py", "registries.py",
                   "liveness.py", "placement.py", "timing.py", "calibration.py", "clock_watch.py", "cost.py",
                   "op_math.py", "fingerprint.py", "correctness.py", "batch.py", "allocator.py", "compile_cache.py",
                   "extension_cache.py", "compiler_warm.py", "request.py", "cpu_facts.py", "import_phase.py",
                   "timed_phase.py")
# a runner may start the harness warm (forked from a worker that imported torch once); a job whose
# candidate (or problem) compiles with torch.compile asks for Dynamo and Inductor imported too
HARNESS_ENTRY = PythonEntry("kernel_harness.py", HARNESS_MODULES)
COMPILER_ENTRY = replace(HARNESS_ENTRY, extras=("compiler",))


def harness_entry(*sources: str) -> PythonEntry:
    return COMPILER_ENTRY if any(uses_dynamo(s) for s in sources) else HARNESS_ENTRY


_HARNESS_NAME = "kernel_harness.py"
_TEXT_LIMIT = 4000


def _tail(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def wire_request(req: KernelRequest, nonce: str, cache_key: str | None = None, shipped: bool = False,
                 isa: dict | None = None) -> MeasureRequest:
    """The request as the harness reads it (``harness/request.py``): every field written, so the
    harness parses it strictly."""
    body = {k: v for k, v in asdict(req).items()
            if k not in ("problem_source", "candidate_source", "reuse_compiled")}
    if req.extra_time_s is None:
        body["extra_time_s"] = 2 * req.time_budget_s
    cache = {"key": cache_key, "in": ARCHIVE_IN if shipped else None, "out": ARCHIVE_OUT, **(isa or {})} \
        if cache_key else None
    return MeasureRequest(**body, problem_file="problem.py", candidate_file="candidate.py", nonce=nonce,
                          measure_peak=req.peak is None and not req.device.startswith("cuda"),
                          measure_sol_peak=req.sol_peak is None, compile_cache=cache, inductor=None,
                          timing_pool_bytes=None)


def build_job(req: KernelRequest, nonce: str, cache_key: str | None = None, archive: bytes | None = None,
              isa: dict | None = None) -> Job:
    """The job for one measurement. The harness ships as a file, so Docker runners need no mount;
    so does a compiled candidate's cache (``archive``, from its earlier measurement under
    ``cache_key``), and the job's own comes back as a collected file."""
    if req.mode not in ("ab", "aa"):
        raise ValueError(f"unknown mode {req.mode!r}: use 'ab' (reference vs candidate) or 'aa'")
    if req.placement not in ("shared", "own"):
        raise ValueError(f"unknown placement {req.placement!r}: use 'shared' (one input pool both sides "
                         "sweep) or 'own' (a pool per side)")
    cuda = req.device.startswith("cuda")
    return Job(
        argv=[sys.executable, "-I", "-B", _HARNESS_NAME, "request.json"],
        files={
            _HARNESS_NAME: HARNESS_PATH.read_text(encoding="utf-8"),
            **{name: HARNESS_PATH.with_name(name).read_text(encoding="utf-8")
               for name in HARNESS_MODULES},
            "problem.py": req.problem_source,
            "candidate.py": req.candidate_source,
            "request.json": wire_request(req, nonce, cache_key, archive is not None, isa).to_json(),
            **({ARCHIVE_IN: archive} if cache_key and archive else {}),
        },
        timeout_s=req.timeout_s,
        collect=["result.json"] + ([ARCHIVE_OUT] if cache_key else []),
        # A CUDA context reserves far more virtual address space than it uses: RLIMIT_AS would
        # make every GPU run fail, so GPU memory is bounded by the device (and Docker) instead.
        memory_bytes=None if cuda else req.memory_bytes,
        entry=harness_entry(req.candidate_source, req.problem_source),
    )


def _parse(res: JobResult, nonce: str) -> dict | None:
    raw = res.outputs.get("result.json")
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    # A result without our nonce was not written by the harness (e.g. forged by the candidate).
    if not isinstance(data, dict) or data.get("nonce") != nonce:
        return None
    return data


def _died_how(res: JobResult) -> str:
    if res.signal is not None:
        try:
            return f"killed by {signal.Signals(res.signal).name}"
        except ValueError:
            return f"killed by signal {res.signal}"
    return f"exited with code {res.returncode}"


def _classify_death(res: JobResult, req: KernelRequest, partial: dict | None) -> tuple[str, str]:
    """Why a child ended without a finished result.json, from its exit and its last checkpoint."""
    phase = partial.get("phase") if partial else None
    where = f" during phase '{phase}'" if phase else " before the harness started"
    stderr = _tail(res.stderr_tail.strip())
    how = _died_how(res)
    if res.timed_out:
        return "timeout", f"exceeded the time limit of {req.timeout_s:g} s{where}; process killed"
    memory_limited = req.memory_bytes is not None and not req.device.startswith("cuda")
    # The runner knows when it can (a container's OOMKilled flag); otherwise a SIGKILL nobody
    # else sent, under a memory limit, is the kernel's OOM killer.
    oom_killed = res.oom_killed if res.oom_killed is not None else (
        res.signal == signal.SIGKILL and memory_limited)
    if oom_killed or "MemoryError" in stderr:
        return "oom", f"out of memory{where} ({how})\n{stderr}".rstrip()
    if partial is None and "result.json" in res.outputs:
        # The harness writes result.json atomically and always with our nonce: this one is forged.
        return "runtime_error", ("result.json was not written by the harness (overwritten by the "
                                 f"candidate?); the process {how}")
    if phase == "candidate_import":
        return "compile_error", f"the process {how} while importing the candidate\n{stderr}".rstrip()
    if phase == "reference forward" and not partial.get("candidate_loaded"):
        return "harness_error", f"the reference Model {how}{where} without a result\n{stderr}".rstrip()
    if phase not in (None, "import"):
        # The harness was running candidate code when the process vanished (segfault, os._exit).
        return "runtime_error", f"the process {how}{where} without a result\n{stderr}".rstrip()
    return "harness_error", f"the harness {how}{where} without a result\n{stderr}".rstrip()


def _from_result(data: dict, res: JobResult) -> KernelMeasurement:
    # a measurement taken on another GPU than the one whose clocks were held is refused
    check_identity(data.get("fingerprint") or {}, getattr(res, "fingerprint", None) or {})
    extra = {k: data.get(k) for k in ("phase", "recheck", "probe", "sizes_applied")}
    extra.update(returncode=res.returncode, stderr_tail=_tail(res.stderr_tail))
    stats = dict(data.get("stats") or {})
    stats["job_wall_s"] = res.duration_s  # measured by the parent: the candidate cannot touch it
    return KernelMeasurement(
        status=data.get("status", "error"),
        error_class=data.get("error_class"),
        error_text=data.get("error_text"),
        correctness=list(data.get("correctness") or []),
        baseline_samples=[float(x) for x in data.get("baseline_samples") or []],
        candidate_samples=[float(x) for x in data.get("candidate_samples") or []],
        inner=int(data.get("inner") or 0),
        # the runner's view (host facts, GPU clocks, throttle reasons, read outside the sandbox
        # where the candidate cannot lie about them) wins over the harness's view from inside
        fingerprint={**(data.get("fingerprint") or {}), **(getattr(res, "fingerprint", None) or {})},
        duration_s=res.duration_s,
        # the harness's phases inside the job, and the runner's around it (set-up, start, clean-up)
        phase_times={**(data.get("phase_times") or {}), **(getattr(res, "phase_times", None) or {})},
        input_shapes=data.get("input_shapes"),
        warnings=list(data.get("warnings") or []) + list(getattr(res, "notes", None) or []),
        extra=extra,
        stats=stats,
    )


def _error(error_class: str, text: str) -> KernelMeasurement:
    return KernelMeasurement("error", error_class, _tail(text), [], [], [], 0, {}, 0.0, {})


def precheck_candidate(source: str) -> KernelMeasurement | None:
    """Reject candidates that cannot possibly work without paying for a sandbox start (~seconds).

    Parsing never executes code. The ModelNew test is a plain substring search, so a candidate
    that builds ModelNew dynamically still goes to the harness, which has the final word.
    """
    try:
        ast.parse(source, filename="candidate.py")
    except SyntaxError as e:
        return _error("compile_error", f"candidate.py line {e.lineno}: SyntaxError: {e.msg}\n"
                      f"{(e.text or '').rstrip()}")
    except (ValueError, RecursionError, MemoryError) as e:
        return _error("compile_error", f"candidate.py cannot be parsed: {type(e).__name__}: {e}")
    if "ModelNew" not in source:
        return _error("compile_error", "the candidate defines no `class ModelNew` (a KernelBench "
                      "solution must define ModelNew with Model's constructor)")
    return None


def _finish(res: JobResult, req: KernelRequest, nonce: str) -> KernelMeasurement:
    """Turn what one measurement left behind into a KernelMeasurement; never raises."""
    data = _parse(res, nonce)
    if data is not None and data.get("status") in ("ok", "error") and not res.timed_out:
        m = _from_result(data, res)
        keep_peaks(req, m.stats)
        if m.status == "ok":
            check_peaks(req, m)
        if m.status == "error" and m.error_class not in ERROR_CLASSES:
            m.error_class = "harness_error"
        return m
    error_class, text = _classify_death(res, req, data)
    m = _from_result(data or {}, res)
    m.status, m.error_class, m.error_text = "error", error_class, _tail(text)
    m.baseline_samples, m.candidate_samples = [], []
    return m


_DEFAULT_CACHE = object()


def compile_facts(m: KernelMeasurement, cache: str) -> dict:
    """The candidate's first call (its compilation, or the cache's load) apart from its timing:
    ``compile_s`` is that call less the steady per-call time of the timed samples, plus Inductor's
    vector-ISA probe when the job ran it ahead of the candidate (harness/compile_cache.py);
    ``import_s`` when importing the problem and the candidate took a second or more (a
    ``load_inline`` extension is built there, not at the first call)."""
    first = (m.stats.get("first_call_s") or [None, None])[-1]
    steady = sorted(m.candidate_samples)[len(m.candidate_samples) // 2] if m.candidate_samples else 0.0
    probe = float((m.stats.get("compile_cache") or {}).get("isa_probe_s") or 0.0)
    out: dict = {"cache": cache}
    imported = (m.phase_times or {}).get("import")
    if isinstance(imported, (int, float)) and imported >= 1.0:  # a build at import (load_inline)
        out["import_s"] = round(float(imported), 3)
    if isinstance(first, (int, float)):
        out.update(first_call_s=round(float(first), 4),
                   compile_s=round(max(0.0, float(first) - steady) + probe, 4))
    return out


def measure_kernel(runner: Runner, req: KernelRequest, cache: CompileCache | None | object = _DEFAULT_CACHE
                   ) -> KernelMeasurement:
    """Measure one candidate against its reference. Failures come back as data, never raised.

    A compiled candidate's artifacts are kept in ``cache`` (default: the user's, see
    ``compile_cache.py``; None: off) under its own key and shipped into its next measurement."""
    if req.mode != "aa":
        rejected = precheck_candidate(req.candidate_source)
        if rejected is not None:
            return rejected
    nonce = secrets.token_hex(16)
    req = with_peaks(req)
    store = default_cache() if cache is _DEFAULT_CACHE else cache
    key, archive = lookup(store, req, runner)
    res = runner.run(build_job(req, nonce, key, archive, vec_isa.hint(runner, req.device) if key else None))
    m = _finish(res, req, nonce)
    status = "off"
    if key:
        status = (m.stats.get("compile_cache") or {}).get("status") or ("hit" if archive else "miss")
        fresh = res.outputs.get(ARCHIVE_OUT)
        if fresh and m.ok and store.put(key, fresh):  # type: ignore[union-attr]
            m.stats.setdefault("compile_cache", {})["kept"] = True
    m.stats["compile"] = compile_facts(m, status)
    return m


def prewarm(runner: Runner, req: KernelRequest) -> bool:
    """Have ``runner`` start warming the harness for measurements like ``req`` (torch's import in
    its warm worker) while the caller goes on; nothing is measured. True if a warm-up started."""
    return runner.prewarm(build_job(req, "prewarm"))


def measure_kernels(runner: Runner, reqs: list[KernelRequest]) -> list[KernelMeasurement]:
    """Measure several candidates in ONE sandbox job: the harness imports torch once and forks a
    child per request (harness/batch.py), so each candidate still runs in a process of its own.
    For corpora, benchmarks and A/A studies, where torch's import would dominate the cost.

    GPU requests are measured one job each instead (uncached, like the batch): a child the
    harness forks is a process the job's Landlock rules were not built for, and NVIDIA's driver
    must write the starting process's own ``/proc/<pid>`` (``sandbox/runners/landlock.py``) — on an H100
    host every batched CUDA request failed with CUDA error 304. The warm worker already pays
    torch's import once for them."""
    out: list[KernelMeasurement | None] = [None] * len(reqs)
    todo = []
    for i, r in enumerate(reqs):
        if r.device.startswith("cuda"):  # its own job (it runs the static check itself)
            out[i] = measure_kernel(runner, r, cache=None)
            continue
        rejected = precheck_candidate(r.candidate_source) if r.mode != "aa" else None
        if rejected is not None:
            out[i] = rejected
        else:
            todo.append((i, with_peaks(r), secrets.token_hex(16)))
    if todo:
        jobs = [build_job(r, n) for _, r, n in todo]
        files = {k: v for k, v in jobs[0].files.items() if k not in ("problem.py", "candidate.py", "request.json")}
        entries = []
        for k, (_, r, nonce) in enumerate(todo):
            files[f"problem-{k}.py"], files[f"candidate-{k}.py"] = r.problem_source, r.candidate_source
            # no cache between jobs, the per-process costs skipped all the same (compile_cache.settle)
            hint = vec_isa.hint(runner, r.device) if uses_compiler(r.candidate_source) and \
                not uses_compiler(r.problem_source) else None
            entries.append(replace(wire_request(r, nonce), inductor=hint, problem_file=f"problem-{k}.py",
                                   candidate_file=f"candidate-{k}.py"))
        files["request.json"] = write_batch(entries)
        limits = [j.memory_bytes for j in jobs]
        batch = Job(argv=jobs[0].argv, files=files, timeout_s=sum(r.timeout_s for _, r, _ in todo) + 30,
                    collect=[f"{p}-{k}.{e}" for k in range(len(todo))
                             for p, e in (("result", "json"), ("status", "json"), ("stderr", "txt"))],
                    memory_bytes=None if None in limits else max(limits),
                    entry=harness_entry(*(r.candidate_source for _, r, _ in todo)))
        res = runner.run(batch)
        for k, (i, r, nonce) in enumerate(todo):
            out[i] = m = _finish(_child_result(res, k), r, nonce)
            m.stats["compile"] = compile_facts(m, "off")  # forked children: no cache between jobs
    return [m for m in out if m is not None]


def _child_result(res: JobResult, k: int) -> JobResult:
    """The k-th child's end as if it had been a job of its own (the parent harness timed it)."""
    try:
        st = json.loads(res.outputs[f"status-{k}.json"])
    except (KeyError, ValueError):
        st = None  # the whole job died before this child ended
    raw = res.outputs.get(f"result-{k}.json")
    err = (res.outputs.get(f"stderr-{k}.txt") or b"").decode("utf-8", errors="replace")
    return JobResult(
        returncode=st["returncode"] if st else res.returncode,
        timed_out=bool(st["timed_out"]) if st else res.timed_out,
        duration_s=float(st["duration_s"]) if st else res.duration_s,
        stdout_tail="", stderr_tail=_tail(err or res.stderr_tail),
        outputs={"result.json": raw} if raw is not None else {},
        signal=st["signal"] if st else res.signal,
        fingerprint=dict(getattr(res, "fingerprint", None) or {}),
        notes=list(getattr(res, "notes", None) or []))
