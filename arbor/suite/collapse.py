"""Which suite wins come from an algebraic collapse.

A graph-algebra move that removes whole work — a Linear followed by a sum/mean folded into a
matrix-vector product, reductions over size-1 dimensions, ``diag(v) @ B`` as a broadcast — turns
a GEMM chain into something two or three orders of magnitude cheaper (91-318x on the development
set). One such problem lifts a geomean more than every other win together, so the suite table
marks these wins and gives the geomeans with and without them (``table.summary``).

Detected from the winning node's move path: a collapse move of the graph-algebra family
(``COLLAPSE_MOVES``), or ``graph-algebra-all`` when one of the collapse passes changes its
parent's source (it also runs the non-collapsing passes: affine folds, transposes, activations).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ALGEBRA_FAMILY = "graph-algebra"
COLLAPSE_PASSES = ["linear_reduction", "size1", "diag"]
COLLAPSE_MOVES = {"graph-fold-linear-reduction", "graph-size1-reductions", "graph-diag-matmul"}
ALL_PASSES_MOVE = "graph-algebra-all"
# graph-algebra-all's other passes, which can open the way for a collapse (a ``x / 2`` between the
# GEMM and the sum is folded away first: l2_05's 112x win went unmarked without them)
PREPARING_PASSES = ["transposes", "affine", "scale_operand", "activations"]


def path_to(store, node_id: int) -> list:  # type: ignore[no-untyped-def]
    """The nodes from the baseline's first child down to ``node_id`` (empty for the baseline)."""
    out = []
    node = store.get_node(node_id)
    while node is not None and node.parent_id is not None:
        out.append(node)
        node = store.get_node(node.parent_id)
    return out[::-1]


def collapsed(parent_source: str) -> bool:
    """Whether a collapse pass rewrites ``parent_source`` once graph-algebra-all's other passes
    have (what graph-algebra-all did to it)."""
    from arbor.agents.transforms import apply_move

    try:
        prepared = apply_move(parent_source, "graph_rewrite", {"passes": PREPARING_PASSES}) or parent_source
        return apply_move(prepared, "graph_rewrite", {"passes": COLLAPSE_PASSES}) is not None
    except Exception:  # noqa: BLE001 - a source the passes cannot trace collapsed nothing
        return False


def collapse_moves(store, node_id: int | None) -> list[str]:  # type: ignore[no-untyped-def]
    """The moves on ``node_id``'s path that collapsed the graph ([] when none, or no node)."""
    if node_id is None:
        return []
    out = []
    for node in path_to(store, node_id):
        if node.family != ALGEBRA_FAMILY and node.move_id not in COLLAPSE_MOVES | {ALL_PASSES_MOVE}:
            continue
        if node.move_id in COLLAPSE_MOVES:
            out.append(node.move_id)
        elif node.move_id == ALL_PASSES_MOVE:
            parent = store.get_node(node.parent_id)
            if collapsed(store.get_artifact(parent.artifact_sha)):
                out.append(node.move_id)
    return out


@contextmanager
def open_suite_store(store_url: str | None) -> Iterator[object | None]:
    """The suite's store opened read only, or None when there is none or it cannot be opened
    (what it would have said stays unknown); closed after."""
    store = None
    if store_url:
        from arbor.search_tree import open_store

        try:
            store = open_store(store_url, read_only=True)
        except Exception:  # noqa: BLE001 - no store: the caller's annotations stay unknown
            store = None
    try:
        yield store
    finally:
        if store is not None:
            store.close()  # type: ignore[attr-defined]


def mark(rows: list[dict], store_url: str | None = None) -> list[dict]:
    """Fill ``row["collapse"]`` (the collapse moves of its verified win's path, [] for none) in
    rows that lack it, from the suite's store (rows of an older run); rows without a verified win
    get []. Returns the rows."""
    todo = [r for r in rows if "collapse" not in r and "error" not in r]
    if not todo:
        return rows
    with open_suite_store(store_url) as store:
        for r in todo:
            if not r.get("verified") or r.get("best_node") is None:
                r["collapse"] = []
            elif store is not None:
                try:
                    r["collapse"] = collapse_moves(store, int(r["best_node"]))
                except Exception:  # noqa: BLE001 - a node the store no longer has
                    r["collapse"] = None
            else:
                r["collapse"] = None
    return rows


def suite_store_url(out_dir: Path) -> str | None:
    """The shared store of a suite's output folder (``arbor suite`` writes ``suite.db`` there)."""
    db = Path(out_dir) / "suite.db"
    return f"sqlite:///{db}" if db.is_file() else None
