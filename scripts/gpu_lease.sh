#!/usr/bin/env bash
# Everything a short GPU lease should run, in one unattended command that ends inside its budget:
#
#   scripts/gpu_lease.sh OUT_DIR [BUDGET_S] [CHECK_SHARE_PERCENT] [SUITE_IDS]
#   e.g. scripts/gpu_lease.sh "$OUT" 500 60          (the device tool: OUT is its return folder)
#
# 1. install the wheelhouse (./wheelhouse, from scripts/wheelhouse.sh: each wheel only where the
#    host's version is missing or older) and Arbor, no network, each under a time limit;
# 2. scripts/gpu_check.sh with CHECK_SHARE_PERCENT of what is left (default 60); when the device
#    does not start under the default sandbox it runs the Landlock right-by-right bisect and the
#    stopped campaigns again with `filesystem: host` (both in gpu_check.json);
# 3. scripts/gpu_suite.sh on the problems SUITE_IDS (default: all) with the rest, as a deadline:
#    problems that do not fit are skipped and named, gpu_suite.json is rewritten after each one.
# Every step runs under `timeout` cut to what is left; the whole ends by BUDGET_S (less a margin
# for the archive). OUT_DIR gets at most 7 files: env.txt, check.log, gpu_check.json, suite.log,
# gpu_suite.json, lease.txt (each step's time and exit code) and logs.tgz (every step's raw output,
# the suite's stores and table). Exit 0 whatever failed: the files say what did.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: scripts/gpu_lease.sh OUT_DIR [BUDGET_S] [CHECK_SHARE_PERCENT] [SUITE_IDS]}"
BUDGET="${2:-500}"
SHARE="${3:-60}"
IDS="${4:-}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
S=$(date +%s)
MARGIN=15  # the archive and the last lines after the suite
LOGS="$(mktemp -d)"
mkdir -p "$OUT"
left() { echo $(( BUDGET - MARGIN - ($(date +%s) - S) )); }
# run NAME LIMIT CMD...: CMD under min(LIMIT, what is left), its time and exit code in lease.txt
run() {
  local name="$1" want="$2" t l; shift 2
  l=$(left); t=$(( want < l ? want : l ))
  if [ "$t" -lt 5 ]; then echo "$name: skipped, ${l} s left" >> "$OUT/lease.txt"; return 124; fi
  local t0=$(date +%s) rc
  timeout -s INT -k 10 "$t" "$@"; rc=$?
  echo "$name: rc $rc, $(( $(date +%s) - t0 )) s (limit $t s)" >> "$OUT/lease.txt"
  return $rc
}
: > "$OUT/lease.txt"
{ run nvidia-smi 20 nvidia-smi 2>&1
  run versions 60 "$PY" -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)" 2>&1
  run pip-version 30 "$PY" -m pip --version; nproc; uname -a; } > "$OUT/env.txt"
if ls wheelhouse/*.whl >/dev/null 2>&1; then
  run wheelhouse 120 bash scripts/wheelhouse.sh --install wheelhouse "$PY" >> "$OUT/env.txt" 2>&1
fi
run install-arbor 120 "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e . \
  >> "$OUT/env.txt" 2>&1 || echo "gpu_lease: the editable install failed (see above)" >> "$OUT/env.txt"
echo "[setup $(( $(date +%s) - S )) s]" >> "$OUT/env.txt"

CHECK_S=$(( $(left) * SHARE / 100 ))
# gpu_check.sh cuts each of its steps to its own budget; the outer limit is the backstop
ARBOR_GPU_CHECK_BUDGET_S="$CHECK_S" ARBOR_GPU_CHECK_LOGS="$LOGS/check" \
  run gpu_check $(( CHECK_S + 20 )) bash scripts/gpu_check.sh "$OUT/gpu_check.json" > "$OUT/check.log" 2>&1
tail -14 "$OUT/check.log"

SUITE_S=$(left)
if [ "$SUITE_S" -ge 90 ]; then
  echo "[suite: ${SUITE_S} s]"
  # --total-s is the suite's own deadline; SIGINT at the outer limit still leaves its JSON written
  run gpu_suite "$SUITE_S" bash scripts/gpu_suite.sh ${IDS:+--ids "$IDS"} --total-s $(( SUITE_S - 25 )) \
    --out "$LOGS/suite" --json "$OUT/gpu_suite.json" > "$OUT/suite.log" 2>&1
  tail -25 "$OUT/suite.log"
else
  echo "gpu_lease: ${SUITE_S} s left: too little for the suite" | tee "$OUT/suite.log"
fi
cp benchmarks/results/eval_overhead_cuda.json "$LOGS/" 2>/dev/null
timeout -k 2 10 tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
rm -rf "$LOGS"
echo "[gpu_lease: $(( $(date +%s) - S )) s of $BUDGET]" | tee -a "$OUT/lease.txt"
exit 0
