"""`tree` and `history` at 80 columns: box-drawing branches, no move name split mid-word."""

from __future__ import annotations

import io
from datetime import datetime

from rich.console import Console

from arbor.cli.terminal import print_history, print_tree
from arbor.search_tree.records import NodeRecord

MOVES = ["inplace-elementwise", "pow-strength-reduction", "fused-gelu-tanh-builtin", "threads-1"]


def _node(i, parent, move, depth):
    now = datetime(2026, 1, 1)
    return NodeRecord(id=i, campaign_id=1, parent_id=parent, depth=depth, state="rejected" if i % 2 else "accepted",
                      artifact_sha="x", specialist="h", move_id=move, family=None, hypothesis="", prior=0.5,
                      predicted_gain=None, value=0.1, speedup=1.1, diagnosis="no_gain", step=i,
                      reason="the candidate was not significantly faster than its parent across the rounds",
                      created_at=now, updated_at=now, finished_at=now)


def _console():
    return Console(width=80, file=io.StringIO(), record=True, color_system=None)


def test_history_keeps_move_names_whole_at_80_columns():
    rows = [{"id": i, "parent": 1 if i > 1 else None, "depth": 1, "state": "rejected", "move": m,
             "speedup": 1.01, "diagnosis": "no_gain", "reason": _node(i, 1, m, 1).reason}
            for i, m in enumerate([None] + MOVES, 1)]
    c = _console()
    print_history(c, rows, "c")
    text = c.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for m in MOVES:
        assert m in text, m
    # the reason wraps at word boundaries: every word of it is whole somewhere on the screen
    words = set(text.split())
    assert all(w in words for w in rows[1]["reason"].split())


def test_tree_draws_branches_under_their_parent():
    lines = [(0, _node(1, None, None, 0), True), (1, _node(2, 1, MOVES[0], 1), True),
             (2, _node(4, 2, MOVES[2], 2), True), (1, _node(3, 1, MOVES[1], 1), False),
             (2, _node(5, 3, MOVES[3], 2), False)]
    c = _console()
    print_tree(c, lines)
    text = c.export_text().splitlines()
    assert text[0].startswith("★ [1] baseline")
    assert any(line.startswith(("├── ★ [2]", "┣━━ ★ [2]")) for line in text), text
    child_of_3 = next(line for line in text if "[5]" in line)
    assert child_of_3.index("[5]") > next(line for line in text if "[3]" in line).index("[3]")
    assert max(len(line) for line in text) <= 80
