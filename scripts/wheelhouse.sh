#!/usr/bin/env bash
# Wheels of Arbor's runtime dependencies for an air-gapped host (most GPU clusters reach no index).
#
#   scripts/wheelhouse.sh PYTHON_VERSION PLATFORM [TARGET_PIP_LIST] [OUT_DIR]
#   e.g. scripts/wheelhouse.sh 3.12 manylinux_2_28_x86_64 scripts/gpu-host-pip-list.txt wheelhouse
#   scripts/wheelhouse.sh --install OUT_DIR [PYTHON]     # on the target: no network, never a downgrade
#
# TARGET_PIP_LIST is the target's `pip list` (or `pip freeze`): what it already has in a known
# version is skipped; small dependencies it lists without one are carried (scripts/wheelhouse.py).
# --install installs each wheel only where PYTHON's own version is missing or older
# (gpu_check.sh, gpu_suite.sh and gpu_lease.sh do this when given the folder).
# Details and options (--extras, --exclude): python3 scripts/wheelhouse.py --help
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--install" ]; then
  exec "${3:-${PYTHON:-python3}}" scripts/wheelhouse.py install "${2:?usage: scripts/wheelhouse.sh --install DIR [PYTHON]}"
fi
if [ $# -lt 2 ]; then
  echo "usage: scripts/wheelhouse.sh PYTHON_VERSION PLATFORM [TARGET_PIP_LIST] [OUT_DIR]" >&2
  exit 2
fi
args=("$1" "$2")
if [ -n "${3:-}" ]; then args+=(--have "$3"); fi
args+=(-o "${4:-wheelhouse}")
exec "${PYTHON:-python3}" scripts/wheelhouse.py "${args[@]}"
