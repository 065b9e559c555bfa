"""A serving campaign through the CLI, against the scripted server: the tiny-server skills raise
the batch size because requests queue, the Critic verifies the gain, the summary prints both
fronts — and no server process survives a normal end, Ctrl-C, or kill -9 followed by a resume."""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arbor.sandbox.runners.proctree import pid_alive

from tests.arbor.helpers import arbor

SCRIPTED = Path(__file__).resolve().parents[2] / "sandbox" / "serving" / "scripted_server.py"

CAMPAIGN = """name: serve_e2e
target:
  kind: serving
  engine: tiny
  model: m
  command: "{{python}} {{campaign_dir}}/scripted_server.py --port {{port}} --slots {{max_batch_size}} --ttft-ms {ttft} --itl-ms 5"
  knobs:
    max_batch_size: {{default: 1, min: 1, max: 64}}
  server_mode: concurrent
  startup_timeout_s: 20
  stop_grace_s: 1
  load:
    synthetic: {{input_len: {{mean: 8}}, output_len: {{mean: 4}}}}
    concurrency: [1, 4]
    num_prompts: 8
    warmup_requests: 1
    repeats: {repeats}
  slo: {{e2e_ms: 150}}
budget: {{max_evaluations: {evals}, max_wall_s: 120}}
critic: {{max_cv: 0.3, min_speedup: 1.05}}
sandbox: {{timeout_s: 60}}
"""


def setup(tmp_path: Path, evals: int = 2, ttft: int = 30, repeats: int = 2) -> Path:
    shutil.copy(SCRIPTED, tmp_path / "scripted_server.py")
    p = tmp_path / "serve.yaml"
    p.write_text(CAMPAIGN.format(evals=evals, ttft=ttft, repeats=repeats))
    return p


def servers_of(tmp_path: Path) -> list[int]:
    """Live processes started from this test's campaign folder (checked, never killed, by path)."""
    needle = str(tmp_path).encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if needle in cmd and b"scripted_server.py" in cmd and pid_alive(int(entry.name)):
                out.append(int(entry.name))
    return out


def leases(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "arbor_runs" / "serve_e2e" / "servers").glob("*.json"))


def wait_for_server(tmp_path: Path, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = servers_of(tmp_path)
        if pids and leases(tmp_path):
            return pids
        time.sleep(0.05)
    raise AssertionError("no server started")


def gone(pids, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _default_ctrl_c() -> None:
    # a shell that starts the suite in the background (`nohup pytest &`) hands its children SIGINT
    # ignored, and Python keeps it ignored: the test's Ctrl-C would be lost, not Arbor's handling
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(spec: Path, cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.Popen([sys.executable, "-m", "arbor", "run", str(spec)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_ctrl_c)


@pytest.mark.slow
def test_serving_campaign_survives_ctrl_c_and_kill_9_and_finds_a_verified_improvement(tmp_path):
    """One campaign, three runs: Ctrl-C while the first servers start, kill -9 of the resumed run,
    then a resume to the end. No server may outlive any of them."""
    spec = setup(tmp_path, evals=1)

    # 1. Ctrl-C as soon as a server is up: arbor stops every server, then exits 130
    p = start_run(spec, tmp_path)
    try:
        pids = wait_for_server(tmp_path)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 130 and "interrupted" in err, err
        assert gone(pids) and servers_of(tmp_path) == [] and leases(tmp_path) == [], (pids, out, err)
    finally:
        if p.poll() is None:
            p.kill()

    # 2. kill -9 of the resumed run: PR_SET_PDEATHSIG takes the servers down with it
    p = start_run(spec, tmp_path)
    try:
        pids = wait_for_server(tmp_path)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=30)
        assert gone(pids), "the servers outlived a kill -9 of arbor"
    finally:
        if p.poll() is None:
            p.kill()

    # 3. resume to the end: the node left running is re-queued; the batch-size move (fired by the
    #    queueing symptom) is measured, confirmed by the Critic, and the summary shows both fronts
    r = arbor("run", str(spec), "--save-result", "result.json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    # per load level, the columns of `vllm bench serve`
    for col in ("TTFT", "TPOT", "ITL", "median", "p99", "out tok/s", "goodput req/s", "failed"):
        assert col in out, col
    summary = out[out.index("stop reason"):]
    assert "throughput ratio" in summary and "speedup" not in summary
    # final verification, as for kernels: the best re-measured to critic.final_measurements, and
    # the ratio reported is the median of those, with the CI of the same estimate
    assert "(verified: median of 3 measurements)" in summary, summary
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["verified"] and len(result["verified"]["speedups"]) == 3, result
    assert result["speedup"] == pytest.approx(statistics.median(result["verified"]["speedups"]))
    assert arbor("report", str(spec), "-o", "rep", cwd=tmp_path).returncode == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Per load level: baseline" in md and "TTFT median ms" in md
    shown = arbor("show", "2", str(spec), cwd=tmp_path).stdout
    assert "this node per load level: latency (ms)" in shown and "TTFT" in shown
    saved = json.loads((tmp_path / "result.json").read_text())["serving"]
    for lv in saved["levels_baseline"] + saved["levels_candidate"]:
        assert {"ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "itl_p99_ms", "out_tok_s", "failed"} <= lv.keys()
    assert "re-queued" in out and "tiny-batch-x4" in out
    assert "throughput–latency fronts" in out and "Pareto" in out and "(verified: median of 3 measurements)" in out
    assert servers_of(tmp_path) == [] and leases(tmp_path) == []
    s = json.loads(arbor("run", str(spec), "--json", cwd=tmp_path).stdout)  # finished: measures nothing
    sv = s["serving"]
    assert sv["best_config"]["max_batch_size"] == 4 and s["speedup"] > 1.5
    assert sv["pareto_improvement_pct"] > 50 and sv["front_baseline"] and sv["front_candidate"]
    assert json.loads(Path(s["best_path"]).read_text())["max_batch_size"] == 4
    assert s["counts"] == {"accepted": 2} and s["measurements"] >= 3  # A/A, the candidate, its confirmation
    assert servers_of(tmp_path) == []
