#!/usr/bin/env python3
"""Which isolation layers does the GPU start under? One JSON line per attempt, then the choice.

    python scripts/device_probe.py [--device cuda] [--network none|host] [--filesystem isolate|host]

Runs unattended on a GPU host with Arbor installed (``scripts/gpu_check.sh`` keeps its output):
the tiny device job bare, under the local sandbox's full plan, under each layer alone (the
Landlock scopes separately), under the full plan without each layer, and under the plan the
runner would choose. Exit code 0 when a plan starts the device, 1 when a campaign would stop.
The same as ``python -m arbor.sandbox.gpu.device_check``; see docs/gpu.md.
"""

from arbor.sandbox.gpu.device_check import main

if __name__ == "__main__":
    raise SystemExit(main())
