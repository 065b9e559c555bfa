#!/usr/bin/env bash
# Wheels of Arbor's runtime dependencies for an air-gapped host (most GPU clusters reach no index).
#
#   scripts/wheelhouse.sh PYTHON_VERSION PLATFORM [TARGET_PIP_LIST] [OUT_DIR]
#   e.g. scripts/wheelhouse.sh 3.12 manylinux_2_28_x86_64 gpu-host-pip-list.txt wheelhouse
#
# TARGET_PIP_LIST is the target's `pip list` (or `pip freeze`): what it already has is skipped.
# Then, on the target:  scripts/gpu_check.sh --wheelhouse OUT_DIR   (installs with no network)
# Details and options (--extras, --exclude): python3 scripts/wheelhouse.py --help
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: scripts/wheelhouse.sh PYTHON_VERSION PLATFORM [TARGET_PIP_LIST] [OUT_DIR]" >&2
  exit 2
fi
args=("$1" "$2")
if [ -n "${3:-}" ]; then args+=(--have "$3"); fi
args+=(-o "${4:-wheelhouse}")
exec "${PYTHON:-python3}" scripts/wheelhouse.py "${args[@]}"
