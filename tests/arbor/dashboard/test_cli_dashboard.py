"""``arbor dashboard`` through the real CLI: single frames, SVG screenshots and user errors."""

from __future__ import annotations

from tests.arbor.helpers import arbor


def test_once_renders_a_frame(shared):
    r = arbor("dashboard", str(shared.yaml), "--once", "--width", "140", "--height", "40")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.rstrip("\n").split("\n")
    assert len(lines) == 40 and max(len(line) for line in lines) <= 140
    assert "dash" in lines[0] and "progress vs budget" in r.stdout and "latest verdicts" in r.stdout


def test_once_accepts_a_db_path_and_campaign_name(shared):
    r = arbor("dashboard", str(shared.db), "--campaign", "dash", "--once", "--width", "100", "--height", "60")
    assert r.returncode == 0, r.stderr
    assert "agent activity" in r.stdout


def test_svg_screenshot(shared, tmp_path):
    out = tmp_path / "shot.svg"
    r = arbor("dashboard", str(shared.yaml), "--svg", str(out), "--width", "120", "--height", "40")
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "progress" in svg and "environment" in svg


def test_a_campaign_that_has_not_started_is_a_waiting_screen(tmp_path):
    db = tmp_path / "later" / "arbor.db"
    r = arbor("dashboard", str(db), "--once", "--width", "100", "--height", "20")
    assert r.returncode == 0, r.stderr
    assert "Waiting for the campaign to start" in r.stdout and "no store yet" in r.stdout
    assert not db.exists() and not db.parent.exists()


def test_bad_campaign_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntarget: {problem: p.py, sizez: {}}\n")
    r = arbor("dashboard", str(bad), "--once")
    assert r.returncode == 2
    assert "sizez" in r.stderr and "Traceback" not in r.stderr
