"""The host's vector-ISA probe (``sandbox/kernel/vec_isa.py``): run as a script in a child of the host,
never in a job and never beside a candidate. Imports torch as a job does, runs Inductor's probe the
way a job's cache would (``compile_cache._isa_probes_passed``), and prints one JSON line with the
environment the verdict holds for."""

import json

import torch  # noqa: F401  as in a job: torch first, then Inductor's probe

from compile_cache import _isa_probes_passed, environment  # this folder is the script's sys.path[0]

print(json.dumps({"environment": environment(), "vec_isa_ok": _isa_probes_passed(run=True)}))
