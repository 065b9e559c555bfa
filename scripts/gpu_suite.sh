#!/usr/bin/env bash
# The GPU development set in one command, unattended, on one GPU (about 8 minutes):
#
#   scripts/gpu_suite.sh [--wheelhouse DIR] [--out DIR] [--ids 1,2] [--levels 1] [--budget N] [--total-s S]
#   ARBOR_GPU_SUITE_DRY=1 scripts/gpu_suite.sh      # CPU dry run: everything but the device
#
# --wheelhouse DIR (or $ARBOR_WHEELHOUSE) installs Arbor's dependencies from a folder of wheels
# with no network first (each only where this Python's is missing or older), then Arbor itself
# (build the folder with scripts/wheelhouse.sh); each install step has a time limit
# ($ARBOR_INSTALL_LIMIT_S, 120 s). --total-s is a deadline: what does not fit is skipped and named.
# Then benchmarks/gpu_suite.py checks every generated Triton kernel of benchmarks/problems_gpu
# against its reference on the device and runs
# `arbor suite` on the set, printing the suite's table (eager, compile, verified best, vs best-of)
# and writing benchmarks/results/gpu_suite.json (dry run: gpu_suite_dry.json). docs/gpu.md.
set -uo pipefail
export ARBOR_SUITE_T0="${ARBOR_SUITE_T0:-$(date +%s.%N)}"  # --total-s counts from here, install included
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHEELHOUSE="${ARBOR_WHEELHOUSE:-}"
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --wheelhouse)
      if [ $# -lt 2 ]; then echo "gpu_suite.sh: --wheelhouse needs a folder of wheels" >&2; exit 2; fi
      WHEELHOUSE="$2"; shift 2 ;;
    --wheelhouse=*) WHEELHOUSE="${1#*=}"; shift ;;
    -h|--help) sed -n "2,12p" "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

if [ -n "$WHEELHOUSE" ]; then
  if ! ls "$WHEELHOUSE"/*.whl >/dev/null 2>&1; then
    echo "gpu_suite.sh: no wheels in $WHEELHOUSE (build them with scripts/wheelhouse.sh)" >&2
    exit 2
  fi
  LIM="${ARBOR_INSTALL_LIMIT_S:-120}"
  timeout -k 5 "$LIM" bash scripts/wheelhouse.sh --install "$WHEELHOUSE" "$PY" || exit 1
  timeout -k 5 "$LIM" "$PY" -m pip install --no-index --no-deps --no-build-isolation -e . || exit 1
  if ! timeout -k 5 60 "$PY" -c "import arbor.cli, arbor.suite.run" 2>/dev/null; then
    echo "gpu_suite.sh: Arbor does not import after installing $WHEELHOUSE — build the wheelhouse for this" \
         "host's Python and platform (scripts/wheelhouse.sh)" >&2
    exit 2
  fi
fi

if [ "${ARBOR_GPU_SUITE_DRY:-0}" != "0" ] && [ -n "${ARBOR_GPU_SUITE_DRY:-}" ]; then
  # the generated kernels run through Triton's interpreter, in this process and in every job
  export TRITON_INTERPRET=1
else
  unset TRITON_INTERPRET  # on the GPU they are compiled, whatever the calling shell set
fi
exec "$PY" -m benchmarks.gpu_suite "${ARGS[@]+"${ARGS[@]}"}"
