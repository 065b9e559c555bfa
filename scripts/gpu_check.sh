#!/usr/bin/env bash
# One command on a new GPU machine, unattended, under 8 minutes: do Arbor's GPU paths hold?
#
#   scripts/gpu_check.sh [--wheelhouse DIR] [OUT.json]
#        (default OUT: benchmarks/results/gpu_check_<host>.json)
#
# 0. install Arbor with no network: the wheels of scripts/wheelhouse.sh (DIR, or $ARBOR_WHEELHOUSE,
#    or ./wheelhouse, or ./.whl when present), then Arbor itself, editable, without build isolation;
# 1. the device probe: which sandbox layers the GPU starts under (one JSON line per attempt);
# 2. `arbor doctor` for a device: cuda campaign with default sandbox settings;
# 3. two campaigns with default sandbox settings, each in a fresh store: the quickstart problem on
#    cuda (campaigns/gpu_quickstart.yaml: its baseline A/A noise floor, which must be <= 1%, says
#    whether small kernels are timed tightly) and a level-2 GEMM + epilogue problem
#    (campaigns/gpu_level2.yaml);
# 4. the gpu-marked tests (real NVML, real CUDA kernels, the harness on the GPU), with what is left
#    (up to 300 s: GPU measurements run one job each) — after the campaigns, which say more per
#    second when the budget is short;
# 5. the cost of one evaluation, phase by phase (benchmarks/eval_overhead.py --device cuda);
# 6. a locked-vs-unlocked measurement: the CV of a matmul timed with CUDA events, unlocked, locked
#    through Arbor's ClockGuard (verified under load), unlocked again (lock skipped with its reason
#    where this process may not lock).
# When the probe (or a campaign) says the device does not start under the default sandbox, two
# steps follow at once: scripts/landlock_rights.py (which Landlock right the driver needs, one
# JSON line per variant) and each stopped campaign again with `sandbox.filesystem: host` — both
# land in the report (landlock_rights, <campaign>.filesystem_host).
# Each step prints its verdict on one line; everything lands in one JSON file; the exit code is
# non-zero when a step failed. Every step has its own time limit (the install's included), cut to
# what is left of the whole run's budget (ARBOR_GPU_CHECK_BUDGET_S, default 480 s; a lease of
# device time is often all there is): a step with too little left is skipped and named in the
# report, never left half-run, and never run without a limit.
# ARBOR_GPU_CHECK_LOGS=DIR keeps every step's raw output (pytest's whole log among them) in DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHEELS="${ARBOR_WHEELHOUSE:-}"
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --wheelhouse) WHEELS="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) OUT="$1"; shift ;;
  esac
done
if [ -z "$WHEELS" ]; then
  for d in wheelhouse .whl; do [ -d "$d" ] && ls "$d"/*.whl >/dev/null 2>&1 && WHEELS="$d" && break; done
fi
OUT="${OUT:-benchmarks/results/gpu_check_$(hostname 2>/dev/null || echo host).json}"
mkdir -p "$(dirname "$OUT")"
TMP="$(mktemp -d)"
trap 'keep_logs' EXIT
T0=$(date +%s)
BUDGET="${ARBOR_GPU_CHECK_BUDGET_S:-480}"
RESERVE=45  # the clock-CV step and the report after the last step
step() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
# limit OWN [MIN]: the step's time limit, OWN cut to the budget left; empty (skip) below MIN (20 s)
limit() {
  local left=$(( BUDGET - RESERVE - ($(date +%s) - T0) ))
  local own="$1" min="${2:-20}"
  if [ "$left" -lt "$min" ]; then echo ""; elif [ "$left" -lt "$own" ]; then echo "$left"; else echo "$own"; fi
}
SKIPPED=""
skip() { SKIPPED="$SKIPPED $1"; step "skipped $1: under the run's budget ($BUDGET s)"; }
keep_logs() { if [ -n "${ARBOR_GPU_CHECK_LOGS:-}" ]; then mkdir -p "$ARBOR_GPU_CHECK_LOGS" && cp -r "$TMP"/. "$ARBOR_GPU_CHECK_LOGS"/ 2>/dev/null; fi; rm -rf "$TMP"; }

# limited NAME OWN MIN CMD...: CMD under its limit (SIGINT first: pytest and the suite still write
# their reports), or NAME skipped when too little is left; the exit code is CMD's (124: its limit)
limited() {
  local name="$1" t
  t="$(limit "$2" "$3")"; shift 3
  if [ -z "$t" ]; then skip "$name"; return 124; fi
  timeout -s INT -k 10 "$t" "$@"
}

INSTALL_RC=0
if [ -n "$WHEELS" ]; then
  step "install: $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS, no network"
  limited install 120 10 bash scripts/wheelhouse.sh --install "$WHEELS" "$PY" > "$TMP/install.txt" 2>&1 || INSTALL_RC=$?
fi
if ! timeout -k 5 60 "$PY" -c "import arbor.cli" >/dev/null 2>&1; then
  limited install_arbor 120 10 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation \
    --disable-pip-version-check -e . >> "$TMP/install.txt" 2>&1 || INSTALL_RC=$?
fi
if ! timeout -k 5 60 "$PY" -c "import arbor.cli, arbor.campaign.run" 2> "$TMP/import.txt"; then
  echo "gpu_check: Arbor does not import ($(tail -1 "$TMP/import.txt")) — build a wheelhouse where pip" \
       "works (scripts/wheelhouse.sh 3.12 manylinux_2_28_x86_64 THEIR_PIP_LIST wheelhouse) and pass --wheelhouse" >&2
  exit 2
fi

step "device probe (scripts/device_probe.py)"
limited device_probe 150 20 "$PY" scripts/device_probe.py > "$TMP/probe.jsonl" 2> "$TMP/probe.err"
PROBE_RC=$?
# the device does not start under the default sandbox: which Landlock right, found at once
# (a probe that replaced a layer and went on says "does not start" too: only a stop counts)
probe_stopped() { grep -qs '"stop": "' "$1"; }
campaign_stopped() {  # no result, and the reason is the device not starting in the sandbox
  timeout -k 5 30 "$PY" -c "import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    s = {}
why = ' '.join(str(s.get(k) or '') for k in ('stop_reason', 'error', 'failed')) or open(sys.argv[2]).read()[-3000:]
sys.exit(0 if not s.get('speedup') and 'does not start' in why else 1)" "$1" "$2" 2>/dev/null
}
BISECTED=0
bisect_rights() {
  [ "$BISECTED" = 1 ] && return
  BISECTED=1
  step "the device stops under the sandbox: Landlock right by right (scripts/landlock_rights.py)"
  limited landlock_rights 90 15 "$PY" scripts/landlock_rights.py > "$TMP/landlock_rights.jsonl" 2>&1
}
if probe_stopped "$TMP/probe.jsonl"; then bisect_rights; fi

step "arbor doctor campaigns/gpu_level2.yaml"
limited doctor 120 20 "$PY" -m arbor doctor campaigns/gpu_level2.yaml --json --skip-llm > "$TMP/doctor.json" 2> "$TMP/doctor.err"
DOCTOR_RC=$?

for c in gpu_quickstart gpu_level2; do
  T="$(limit 140 60)"
  if [ -z "$T" ]; then skip "$c"; continue; fi
  step "campaign campaigns/$c.yaml (default sandbox, limit ${T}s)"
  timeout -k 10 "$T" "$PY" -m arbor run "campaigns/$c.yaml" --json --store "sqlite:///$TMP/$c.db" \
    > "$TMP/$c.json" 2> "$TMP/$c.err"
  echo $? > "$TMP/$c.rc"
  if probe_stopped "$TMP/probe.jsonl" || campaign_stopped "$TMP/$c.json" "$TMP/$c.err"; then
    bisect_rights
    # the same campaign with the filesystem rules given up: does everything else hold?
    HOSTYAML="campaigns/.lease_${c}_filesystem_host.yaml"
    timeout -k 5 30 "$PY" -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); \
d.setdefault('sandbox', {})['filesystem'] = 'host'; d['name'] += '-filesystem-host'; \
yaml.safe_dump(d, open(sys.argv[2], 'w'), sort_keys=False)" "campaigns/$c.yaml" "$HOSTYAML"
    step "campaign $c again with sandbox.filesystem: host"
    limited "${c}_filesystem_host" 140 40 "$PY" -m arbor run "$HOSTYAML" --json \
      --store "sqlite:///$TMP/${c}_fshost.db" > "$TMP/${c}_fshost.json" 2> "$TMP/${c}_fshost.err"
    echo $? > "$TMP/${c}_fshost.rc"
    rm -f "$HOSTYAML"
  fi
done

TESTS_RC=124
T="$(limit 300 60)"
if [ -n "$T" ]; then
  step "gpu-marked tests (limit ${T}s)"
  # SIGINT at the limit: pytest stops and still writes its report
  timeout -s INT -k 20 "$T" "$PY" -m pytest -q -m gpu tests -p no:cacheprovider --timeout 120 \
    --junitxml="$TMP/gpu_tests.xml" > "$TMP/gpu_tests.txt" 2>&1
  TESTS_RC=$?
else
  skip gpu_tests
fi


if [ -f benchmarks/eval_overhead.py ]; then
  T="$(limit 150 60)"
  if [ -n "$T" ]; then
    step "evaluation overhead (benchmarks/eval_overhead.py --device cuda, limit ${T}s)"
    # fresh process vs warm worker, one campaign run each; its JSON: benchmarks/results/eval_overhead_cuda.json
    timeout -k 10 "$T" "$PY" -m benchmarks.eval_overhead --device cuda --reps 1 --modes fresh,warm \
      > "$TMP/eval_overhead.txt" 2>&1
    echo $? > "$TMP/eval_overhead.rc"
  else
    skip eval_overhead
  fi
fi

step "clock CV and the report"
# the report is written before the clock-CV step and again after it: SIGINT at the limit keeps the first
timeout -s INT -k 5 "$(( RESERVE - 5 ))" "$PY" - "$TMP" "$OUT" "$INSTALL_RC" "$PROBE_RC" "$DOCTOR_RC" "$TESTS_RC" "$(( $(date +%s) - T0 ))" "$BUDGET" "$SKIPPED" <<'PYEOF'
import json, os, socket, statistics, sys, time
import xml.etree.ElementTree as ET

tmp, out = sys.argv[1], sys.argv[2]
install_rc, probe_rc, doctor_rc, tests_rc, elapsed, budget = (int(a) for a in sys.argv[3:9])
skipped = sys.argv[9].split()
report = {"host": socket.gethostname(), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
          "loadavg": os.getloadavg(), "install_rc": install_rc, "probe_rc": probe_rc,
          "doctor_rc": doctor_rc, "gpu_tests_rc": tests_rc, "budget_s": budget, "skipped": skipped}
lines, failed = [], []


def verdict(step, ok, text):
    lines.append(f"{'ok  ' if ok else 'FAIL'} {step:<14} {text}")
    if not ok:
        failed.append(step)


def read(name, default=""):
    try:
        return open(os.path.join(tmp, name)).read()
    except OSError:
        return default


try:
    import torch
    report["torch"], report["cuda_runtime"] = torch.__version__, torch.version.cuda
    report["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as exc:  # noqa: BLE001 - the report says what broke
    report["torch"] = f"{type(exc).__name__}: {exc}"

report["probe"] = [json.loads(ln) for ln in read("probe.jsonl").splitlines() if ln.strip().startswith("{")]
choice = next((p for p in reversed(report["probe"]) if "chosen" in p or "stop" in p), None)
if choice is None:
    text = (read("probe.err").strip().splitlines() or ["no output"])[-1]
elif choice.get("stop"):
    text = choice["stop"]
else:
    text = (choice.get("notice") or "every layer of the default plan starts the device") + \
        f" (broken: {', '.join(choice.get('broken') or []) or 'none'})"
verdict("device probe", probe_rc == 0, text[:300])

try:
    report["doctor"] = json.loads(read("doctor.json") or "{}")
except ValueError as exc:
    report["doctor"] = {"error": str(exc), "stderr": read("doctor.err")[-1000:]}
rows = report["doctor"].get("checks", report["doctor"]) if isinstance(report["doctor"], dict) else report["doctor"]
bad = [r for r in (rows if isinstance(rows, list) else []) if isinstance(r, dict) and r.get("status") == "fail"]
verdict("doctor", doctor_rc == 0, "all checks pass" if doctor_rc == 0 else
        "; ".join(f"{r.get('name')}: {r.get('detail') or r.get('fix')}" for r in bad)[:300] or read("doctor.err")[-200:])

try:
    suite = ET.parse(os.path.join(tmp, "gpu_tests.xml")).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    t = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    t["failed"] = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
                   if c.find("failure") is not None or c.find("error") is not None]
    report["gpu_tests"] = t
    verdict("gpu tests", tests_rc == 0 and not t["failed"],
            f"{t['tests'] - t['failures'] - t['errors'] - t['skipped']} passed, {len(t['failed'])} failed, "
            f"{t['skipped']} skipped" + (f" (first: {t['failed'][0]})" if t["failed"] else ""))
except (OSError, ET.ParseError, IndexError) as exc:
    report["gpu_tests"] = {"error": str(exc)}
    verdict("gpu tests", False, "skipped: under the run's budget" if "gpu_tests" in skipped else f"no report ({exc})")
report["gpu_tests_tail"] = read("gpu_tests.txt")[-3000:]


def noise_floor(db):
    try:
        from arbor.search_tree import open_store
        store = open_store(f"sqlite:///{db}", read_only=True)
        try:
            camp = store.list_campaigns()[0]
            evs = store.events(camp.id, limit=10, kinds=["baseline"])
            return float(evs[-1].payload.get("noise_floor")) if evs else None
        finally:
            store.close()
    except Exception:  # noqa: BLE001
        return None


for c in ("gpu_quickstart", "gpu_level2"):
    if c in skipped:
        report[c] = {"skipped": "under the run's budget"}
        verdict(c, False, "skipped: under the run's budget")
        continue
    rc = int(read(f"{c}.rc", "1").strip() or 1)
    try:
        s = json.loads(read(f"{c}.json") or "{}")
    except ValueError:
        s = {}
    floor = noise_floor(os.path.join(tmp, f"{c}.db"))
    s["noise_floor"] = floor
    report[c] = s or {"stderr": read(f"{c}.err")[-2000:]}
    if s.get("speedup"):
        ci = s.get("ci") or [None, None]
        text = (f"verified {s['speedup']:.3f}x CI [{ci[0] or 0:.3f}, {ci[1] or 0:.3f}], A/A floor "
                f"{floor * 100 if floor is not None else float('nan'):.2f}%, {s.get('measurements')} measurements, "
                f"{s.get('counts')}, stop: {(s.get('stop_reason') or '')[:80]}")
    else:
        text = (s.get("error") or s.get("failed") or s.get("stop_reason") or read(f"{c}.err").strip()[-300:]
                or "no result")
    ok = rc == 0 and bool(s.get("speedup")) and not s.get("failed")
    if c == "gpu_quickstart" and floor is not None and floor > 0.01:
        ok, text = False, f"A/A noise floor {floor * 100:.2f}% > 1%; " + text
    verdict(c, ok, text)
    if os.path.exists(os.path.join(tmp, f"{c}_fshost.rc")):  # the retry with filesystem: host
        try:
            h = json.loads(read(f"{c}_fshost.json") or "{}")
        except ValueError:
            h = {}
        h["rc"] = int(read(f"{c}_fshost.rc", "1").strip() or 1)
        h["noise_floor"] = noise_floor(os.path.join(tmp, f"{c}_fshost.db"))
        report[c]["filesystem_host"] = h if len(h) > 2 else {**h, "stderr": read(f"{c}_fshost.err")[-2000:]}
        verdict(f"{c} (fs host)", h["rc"] == 0 and bool(h.get("speedup")),
                f"verified {h['speedup']:.3f}x" if h.get("speedup") else
                (h.get("stop_reason") or read(f"{c}_fshost.err").strip()[-200:] or "no result"))

rights = [json.loads(ln) for ln in read("landlock_rights.jsonl").splitlines() if ln.strip().startswith("{")]
if rights or "landlock_rights" in skipped:
    report["landlock_rights"] = rights
    starts = [r["variant"] for r in rights if r.get("starts")]
    verdict("landlock rights", bool(rights), f"the device starts with: {'; '.join(starts) or 'no variant'}"[:300]
            if rights else "skipped: under the run's budget")

if os.path.exists(os.path.join(tmp, "eval_overhead.rc")):
    rc = int(read("eval_overhead.rc", "1").strip() or 1)
    try:
        report["eval_overhead"] = json.load(open("benchmarks/results/eval_overhead_cuda.json"))
    except (OSError, ValueError):
        report["eval_overhead"] = {"table": read("eval_overhead.txt")[-4000:]}
    tail = read("eval_overhead.txt").strip().splitlines()
    verdict("eval overhead", rc == 0, tail[-1][:200] if tail else "no output")


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


report["elapsed_s"] = elapsed
report["verdicts"] = lines
json.dump(report, open(out, "w"), indent=1, default=str)  # again below, with the clock CV
cv = {"runs": []}
try:
    from arbor.sandbox.gpu import ClockError, ClockGuard, ClockTargets
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
verdict("clock CV", "error" not in cv,
        cv.get("error") or ", ".join(f"{r['label']} {r['cv_mad'] * 100:.2f}% ({r['median_ms']:.3f} ms)" for r in cv["runs"])
        + (f"; lock: {cv['lock_error']}" if "lock_error" in cv else ""))

report["elapsed_s"] = elapsed
report["verdicts"] = lines
json.dump(report, open(out, "w"), indent=1, default=str)
print("\n".join(lines))
print(f"report: {out}  ({elapsed} s before the clock CV step)")
sys.exit(1 if failed or install_rc else 0)
PYEOF
