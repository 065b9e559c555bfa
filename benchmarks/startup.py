"""How long the command line takes to start: read commands and a replayed ``arbor run``.

    python -m benchmarks.startup [--repeats 5] [--against PYTHON]

Builds a replayed campaign (``benchmarks/synthetic.py``'s landscape, 24 evaluations: no torch is
needed to run it) in a temporary folder, then runs each command ``--repeats`` times in fresh
processes. With ``--against`` (the interpreter of another checkout's environment, e.g. one built at
the commit before a change) both run alternately, in one session, so they share the machine's
load and the ratio is fair on a busy box. Per command and interpreter: median wall time, median
CPU time (user + sys of the process and its children), the import time ``python -X importtime``
reports (sum of every module's own time, one extra run), and which of torch / LangGraph the
process imported. Why it matters: the test suite starts hundreds of ``python -m arbor`` processes
(issue 24), and a user types read commands for a look (docs/architecture.md#imports).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import table, write_result
from .synthetic import make_landscape

HEAVY = ("torch", "langgraph", "langchain_core")
SPEC = ("name: startup\ntarget: {kind: replay, landscape: land.json}\n"
        "budget: {max_evaluations: 24, max_wall_s: 600}\ncritic: {min_speedup: 1.02}\n")
COMMANDS = {
    "--help": ["--help"],
    "skills list": ["skills", "list"],
    "history": ["history", "startup.yaml"],
    "tree": ["tree", "startup.yaml"],
    "run (replay, 24 evaluations)": ["run", "startup.yaml"],
}


def _campaign(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    make_landscape().dump(folder / "land.json")
    (folder / "startup.yaml").write_text(SPEC)
    return folder


def _env(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["XDG_DATA_HOME"] = str(folder / "xdg")  # the knowledge store: never the user's
    return env


def _once(python: str, argv: list[str], folder: Path, importtime: bool = False) -> dict:
    """One fresh process: wall and CPU seconds; with ``importtime``, import seconds and heavy modules."""
    cmd = [python, *(["-X", "importtime"] if importtime else []), "-m", "arbor", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
    out = {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}
    if importtime:
        total, loaded = 0, set()
        for line in r.stderr.splitlines():
            if line.startswith("import time:") and "self [us]" not in line:
                self_us, _, name = line[len("import time:"):].split("|")
                total += int(self_us)
                loaded.add(name.strip())
        out["import_s"] = total / 1e6
        out["heavy"] = [m for m in HEAVY if m in loaded]
    return out


def measure(pythons: dict[str, str], repeats: int, root: Path) -> list[dict]:
    """Every command with every interpreter, alternating (the order flips each repeat)."""
    store_dir = _campaign(root / "store")
    _once(next(iter(pythons.values())), COMMANDS["run (replay, 24 evaluations)"], store_dir)  # the store read
    samples: dict[tuple[str, str], list[dict]] = {}
    names = list(pythons)
    for i in range(repeats + 1):  # the last round runs under -X importtime
        order = names if i % 2 == 0 else names[::-1]
        for label, argv in COMMANDS.items():
            for who in order:
                folder = store_dir
                if argv[0] == "run":  # a fresh campaign each time: a second run would only resume
                    folder = _campaign(root / f"run_{who}_{i}")
                row = _once(pythons[who], argv, folder, importtime=i == repeats)
                samples.setdefault((label, who), []).append(row)
                if argv[0] == "run":
                    shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for label in COMMANDS:
        for who in names:
            timed, traced = samples[(label, who)][:-1], samples[(label, who)][-1]
            rows.append({"command": label, "code": who,
                         "wall_s": statistics.median(r["wall_s"] for r in timed),
                         "cpu_s": statistics.median(r["cpu_s"] for r in timed),
                         "import_s": traced["import_s"], "heavy": ", ".join(traced["heavy"]) or "-"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", help="another interpreter (another checkout's environment) to compare with")
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--against-label", default="other")
    args = ap.parse_args()
    started = time.monotonic()
    pythons = {args.label: sys.executable}
    if args.against:
        pythons[args.against_label] = args.against
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="arbor_startup_") as tmp:
        rows = measure(pythons, args.repeats, Path(tmp))
    load_end = os.getloadavg()
    print(table(rows, [("command", "command"), ("code", "code"), ("wall_s", "wall s (median)"),
                       ("cpu_s", "CPU s (median)"), ("import_s", "import s"), ("heavy", "heavy imports")]))
    print(f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end; {args.repeats} runs each, alternated")
    path = write_result("startup", {"repeats": args.repeats, "pythons": pythons,
                                    "load_avg_end": [round(x, 2) for x in load_end], "rows": rows}, started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
