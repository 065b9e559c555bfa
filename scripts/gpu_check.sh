#!/usr/bin/env bash
# One command on the first GPU machine: do Arbor's GPU paths hold?
#
#   scripts/gpu_check.sh [OUT.json]        (default: benchmarks/results/gpu_check_<host>.json)
#
# 1. `arbor doctor` for a device: cuda campaign (torch, driver, toolchain, clock permission);
# 2. the gpu-marked tests (real NVML, real CUDA kernels, the harness on the GPU);
# 3. a locked-vs-unlocked measurement: the CV of a matmul timed with CUDA events, with clocks
#    unlocked, then locked through Arbor's ClockGuard (verified under load), then unlocked again.
#    Locking is skipped with its reason when this process may not lock (non-root, container).
# 4. where one evaluation's time goes on the GPU (benchmarks/eval_overhead.py --device cuda: the
#    quickstart's baseline A/A and one candidate, fresh process vs warm worker; its own JSON in
#    benchmarks/results/eval_overhead_cuda.json).
# Everything lands in one JSON file; the exit code is non-zero when a step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
OUT="${1:-benchmarks/results/gpu_check_$(hostname 2>/dev/null || echo host).json}"
mkdir -p "$(dirname "$OUT")"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

printf 'name: gpu-check\ntarget: {problem: p.py, device: cuda}\nsandbox: {clocks: verify}\n' > "$TMP/c.yaml"
echo 'x = 1' > "$TMP/p.py"
"$PY" -m arbor doctor "$TMP/c.yaml" --json --skip-llm > "$TMP/doctor.json"
DOCTOR_RC=$?

"$PY" -m pytest -q -m gpu tests -p no:cacheprovider --junitxml="$TMP/gpu_tests.xml" > "$TMP/gpu_tests.txt" 2>&1
TESTS_RC=$?

timeout 420 "$PY" -m benchmarks.eval_overhead --device cuda --reps 1 > "$TMP/eval_overhead.txt" 2>&1
EVAL_RC=$?

"$PY" - "$TMP" "$OUT" "$DOCTOR_RC" "$TESTS_RC" "$EVAL_RC" <<'PYEOF'
import json, os, socket, statistics, sys, time
import xml.etree.ElementTree as ET

tmp, out, doctor_rc, tests_rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
eval_rc = int(sys.argv[5])
report = {"host": socket.gethostname(), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
          "loadavg": os.getloadavg(), "doctor_rc": doctor_rc, "gpu_tests_rc": tests_rc}
report["eval_overhead"] = {"rc": eval_rc, "json": "benchmarks/results/eval_overhead_cuda.json",
                           "table": open(f"{tmp}/eval_overhead.txt").read()[-6000:]}
try:
    report["doctor"] = json.load(open(f"{tmp}/doctor.json"))
except (OSError, ValueError) as exc:
    report["doctor"] = {"error": str(exc)}
try:
    suite = ET.parse(f"{tmp}/gpu_tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    report["gpu_tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    report["gpu_tests"]["failed"] = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
                                     if c.find("failure") is not None or c.find("error") is not None]
except (OSError, ET.ParseError, IndexError) as exc:
    report["gpu_tests"] = {"error": str(exc)}
report["gpu_tests_tail"] = open(f"{tmp}/gpu_tests.txt").read()[-3000:]


def cv_run(label, rounds=30, n=4096):
    """Robust CV (MAD/median) of one fp16 matmul timed with CUDA events, after a 2 s warm-up."""
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        a @ a
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); a @ a; e1.record(); e1.synchronize()
        times.append(e0.elapsed_time(e1))
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times)
    return {"label": label, "median_ms": med, "cv_mad": 1.4826 * mad / med, "min_ms": min(times),
            "max_ms": max(times), "rounds": rounds}


cv = {"runs": []}
try:
    from arbor.sandbox.gpu import ClockGuard, ClockTargets
    from arbor.sandbox.gpu import ClockError
    from arbor.sandbox.runner import Job, JobResult
    cv["runs"].append(cv_run("unlocked"))
    guard = ClockGuard("lock", "cuda", ClockTargets(settle_s=2.0))
    try:
        rec = guard.start()
        cv["lock"] = {k: rec.get(k) for k in ("backend", "uuid", "graphics_mhz", "memory_mhz", "graphics_source")}
        job, res = Job(["true"], {}, 60), JobResult(0, False, 0.0, "", "", {})
        guard.before(job)
        cv["runs"].append(cv_run("locked"))
        guard.after(job, res)
        cv["locked_fingerprint"] = {k: v for k, v in res.fingerprint.items() if k.startswith("gpu_")}
    except ClockError as exc:
        cv["lock_error"] = str(exc)
    finally:
        guard.close()
    cv["runs"].append(cv_run("unlocked again"))
except Exception as exc:  # noqa: BLE001 - the report says what broke
    cv["error"] = f"{type(exc).__name__}: {exc}"
report["clock_cv"] = cv
json.dump(report, open(out, "w"), indent=1, default=str)
print(json.dumps({"out": out, "doctor_rc": doctor_rc, "gpu_tests": report.get("gpu_tests"),
                  "clock_cv": [(r["label"], round(r["cv_mad"], 4), round(r["median_ms"], 3)) for r in cv["runs"]],
                  "lock": cv.get("lock") or cv.get("lock_error") or cv.get("error")}, indent=1, default=str))
sys.exit(1 if doctor_rc or tests_rc or eval_rc or "error" in cv else 0)
PYEOF
