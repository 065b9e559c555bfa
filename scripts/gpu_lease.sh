#!/usr/bin/env bash
# Everything a short GPU lease should run, in one unattended command that ends inside its budget:
#
#   scripts/gpu_lease.sh OUT_DIR [BUDGET_S] [CHECK_SHARE_PERCENT] [SUITE_IDS]
#   e.g. scripts/gpu_lease.sh "$OUT" 540 60 1          (the device tool: OUT is its return folder)
#
# 1. install the wheelhouse (./wheelhouse, from scripts/wheelhouse.sh) and Arbor, no network;
# 2. scripts/gpu_check.sh with CHECK_SHARE_PERCENT of the budget (default 60);
# 3. scripts/gpu_suite.sh on the problems SUITE_IDS (default: all) with what is left.
# OUT_DIR gets at most 7 files: env.txt, check.log, gpu_check.json, suite.log, gpu_suite.json and
# logs.tgz (every step's raw output, the suite's stores and table). Exit 0 whatever failed: the
# files say what did.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:?usage: scripts/gpu_lease.sh OUT_DIR [BUDGET_S] [CHECK_SHARE_PERCENT] [SUITE_IDS]}"
BUDGET="${2:-540}"
SHARE="${3:-60}"
IDS="${4:-}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
S=$(date +%s)
LOGS="$(mktemp -d)"
mkdir -p "$OUT"
{ nvidia-smi 2>&1; "$PY" -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)" 2>&1
  "$PY" -m pip --version; nproc; uname -a; } > "$OUT/env.txt"
if ls wheelhouse/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --upgrade --disable-pip-version-check wheelhouse/*.whl >> "$OUT/env.txt" 2>&1
fi
"$PY" -m pip install -q --no-index --no-deps --no-build-isolation --disable-pip-version-check -e . >> "$OUT/env.txt" 2>&1 \
  || echo "gpu_lease: the editable install failed (see above)" >> "$OUT/env.txt"
echo "[setup $(( $(date +%s) - S )) s]" >> "$OUT/env.txt"

CHECK_S=$(( (BUDGET - ($(date +%s) - S)) * SHARE / 100 ))
ARBOR_GPU_CHECK_BUDGET_S="$CHECK_S" ARBOR_GPU_CHECK_LOGS="$LOGS/check" \
  bash scripts/gpu_check.sh "$OUT/gpu_check.json" > "$OUT/check.log" 2>&1
tail -12 "$OUT/check.log"

LEFT=$(( BUDGET - ($(date +%s) - S) - 20 ))
if [ "$LEFT" -ge 90 ]; then
  echo "[suite: ${LEFT} s]"
  timeout -s INT -k 15 "$LEFT" bash scripts/gpu_suite.sh ${IDS:+--ids "$IDS"} --total-s $(( LEFT - 35 )) \
    --out "$LOGS/suite" --json "$OUT/gpu_suite.json" > "$OUT/suite.log" 2>&1
  tail -25 "$OUT/suite.log"
else
  echo "gpu_lease: ${LEFT} s left: too little for the suite" | tee "$OUT/suite.log"
fi
cp benchmarks/results/eval_overhead_cuda.json "$LOGS/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
rm -rf "$LOGS"
echo "[gpu_lease: $(( $(date +%s) - S )) s of $BUDGET]"
exit 0
