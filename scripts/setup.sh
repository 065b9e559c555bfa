#!/usr/bin/env bash
# Install Arbor (editable) without ever replacing a torch that is already there.
#   scripts/setup.sh        the package and its runtime dependencies
#   scripts/setup.sh test   the same plus the test tools, and llama.cpp's server + SmolLM2-135M
#                           (built once per machine into Arbor's cache, minutes on 2 cores; the
#                           llama.cpp tests skip with the reason when the build could not run)
# torch: an existing build (CPU or CUDA/ROCm) is kept. Otherwise torch==2.13.0 is installed —
# machines that carry a local CPU wheel (find-links) get it, GPU machines get PyPI's CUDA build.
# A CPU-only machine without a local wheel can avoid the multi-GB CUDA download with
#   ARBOR_TORCH_INDEX=https://download.pytorch.org/whl/cpu scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  if [ -n "${ARBOR_TORCH_INDEX:-}" ]; then
    "$PY" -m pip install -q "torch==2.13.0" --extra-index-url "$ARBOR_TORCH_INDEX"
  else
    "$PY" -m pip install -q "torch==2.13.0"
  fi
fi
extras=""
if [ "${1:-}" = "test" ]; then extras="[test]"; fi
"$PY" -m pip install -q -e ".${extras}" numpy
if [ "${1:-}" = "test" ]; then
  "$PY" -m arbor.sandbox.serving.llamacpp_install \
    || echo "llama.cpp unavailable: the llama.cpp serving tests will be skipped"
fi
