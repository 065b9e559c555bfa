"""Read commands and a replayed `arbor run` start without torch or LangGraph.

The suite starts hundreds of `python -m arbor` processes and a user types read commands
interactively: torch costs ~4 s of imports on a loaded 2-core machine, LangGraph with
langchain-core ~2 s (issue 24, docs/architecture.md#imports). Each check runs the real command line
(`arbor.cli.main`) in a fresh interpreter and reads `sys.modules` after every command, so the
command that pulls one in is the one named. The same probe must find LangGraph after `arbor run`
(the loop needs it) and torch after a graph transform's first call, so it cannot pass by looking
in the wrong place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WATCHED = ("torch", "triton", "langgraph", "langchain_core")

# argv lists run one after another in one interpreter; "<graph transform>" resolves graph_rewrite
PROBE = r"""
import contextlib, io, json, sys
commands, out, watched = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
from arbor.cli import main
rows = []
for argv in commands:
    buf, code = io.StringIO(), 0
    if argv == ["<graph transform>"]:
        from arbor.agents.transforms import get_transform
        buf.write(get_transform("graph_rewrite").__name__)
    else:
        sys.argv = ["arbor", *argv]
        with contextlib.redirect_stdout(buf):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    rows.append({"argv": argv, "code": code, "out": buf.getvalue(),
                 "loaded": [m for m in watched if m in sys.modules]})
with open(out, "w") as f:
    json.dump(rows, f)
"""


def _probe(tmp: Path, commands: list[list[str]], name: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["XDG_DATA_HOME"] = str(tmp / "xdg")  # the knowledge store: never the user's
    out = tmp / f"{name}.json"
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(commands), str(out), json.dumps(WATCHED)],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
    rows = json.loads(out.read_text())
    for row in rows:
        assert row["code"] == 0, f"arbor {' '.join(row['argv'])} exited {row['code']}: {row['out'][-2000:]}\n{r.stderr[-2000:]}"
    return rows


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A replayed campaign run through `arbor run`, then a graph transform looked up, in one process."""
    sys.path.insert(0, str(REPO))
    from benchmarks.synthetic import make_landscape

    tmp = tmp_path_factory.mktemp("startup")
    make_landscape().dump(tmp / "land.json")
    (tmp / "replay.yaml").write_text("name: replay\ntarget: {kind: replay, landscape: land.json}\n"
                                     "budget: {max_evaluations: 6, max_wall_s: 120}\ncritic: {min_speedup: 1.02}\n")
    return tmp, _probe(tmp, [["run", "replay.yaml"], ["<graph transform>"]], "run")


def test_replayed_run_loads_langgraph_but_not_torch(replayed):
    _, (run, transform) = replayed
    assert "speedup" in run["out"]  # the campaign really ran
    assert run["loaded"] == ["langgraph", "langchain_core"]  # the loop is a LangGraph graph ...
    assert transform["out"] == "graph_rewrite" and "torch" in transform["loaded"]  # ... and torch is seen once used


READ_COMMANDS = [
    ["history", "replay.yaml"],
    ["tree", "replay.yaml"],
    ["show", "2", "replay.yaml"],
    ["best", "replay.yaml", "-o", "best.py"],
    ["query", "--store", "replay.yaml", "select count(*) as n from nodes"],
    ["campaigns", "ls", "--store", "replay.yaml"],
    ["export", "replay.yaml", "-o", "export.json"],
    ["report", "replay.yaml", "-o", "report"],
    ["dashboard", "replay.yaml", "--once"],
    ["compare", "replay.yaml", "replay.yaml"],
    ["calibration", "replay.yaml"],
    ["skills", "list"],  # loads and validates every skill, graph_rewrite and triton_codegen moves included
    ["skills", "show", "graph-algebra"],
    ["knowledge", "ls"],
]


def test_read_commands_load_neither_torch_nor_langgraph(replayed):
    tmp, _ = replayed
    rows = _probe(tmp, READ_COMMANDS, "read")
    heavy = [f"arbor {' '.join(r['argv'])}: {r['loaded']}" for r in rows if r["loaded"]]
    assert not heavy, "a read command imported a heavy library (the first one named is the culprit):\n" + \
        "\n".join(heavy)
    by = {r["argv"][0] + (" " + r["argv"][1] if r["argv"][0] in ("skills", "campaigns") else ""): r["out"] for r in rows}
    assert "accepted" in by["history"] and "graph-algebra-all" in by["skills show"]  # they did their work
    assert (tmp / "best.py").exists() and (tmp / "report" / "report.html").exists()
