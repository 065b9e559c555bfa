"""A candidate the machine's noise rejected (``env_drift``, ``unstable``) is measured once more,
after another evaluation, while the budget has room (arbor/campaign/auto_retry.py); a resumed
campaign retries what the dead process had not."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from arbor.campaign import auto_retry
from arbor.search_tree import open_store

SRC = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * {k}\n"


@dataclass
class _Ctx:
    """What auto_retry reads of a campaign Context."""

    store: object
    campaign: object
    cap: int | None = 8
    evals: int = 1
    retries_due: dict | None = None
    reports: list = field(default_factory=list)

    @property
    def cid(self) -> int:
        return self.campaign.id

    @property
    def target(self):  # type: ignore[no-untyped-def]
        return SimpleNamespace(artifact_kind="python")

    @property
    def spec(self):  # type: ignore[no-untyped-def]
        return SimpleNamespace(budget=SimpleNamespace(max_evaluations=self.cap))

    def evaluations(self) -> int:
        return self.evals

    def report(self, kind: str, payload: dict) -> None:
        self.reports.append((kind, payload))


def _campaign(tmp_path):  # type: ignore[no-untyped-def]
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    camp = store.get_or_create_campaign("c", "kernel", {})
    root = store.add_node(camp.id, store.put_artifact(SRC.format(k=1), "python"), "baseline")
    return store, store.update_campaign(camp.id, root_node_id=root.id), root


def _rejected(store, camp, root, k: int, diagnosis: str, hypothesis: str = "m on node 1"):  # type: ignore[no-untyped-def]
    n = store.add_node(camp.id, store.put_artifact(SRC.format(k=k), "python"), "heuristic", parent_id=root.id,
                       move_id="m", family="f", hypothesis=hypothesis, state="proposed")
    store.transition(n.id, "rejected", diagnosis=diagnosis, reason="noise")
    return store.get_node(n.id)


def test_a_drift_rejection_is_retried_once_after_another_evaluation(tmp_path):
    store, camp, root = _campaign(tmp_path)
    try:
        ctx = _Ctx(store, camp)
        drifted = _rejected(store, camp, root, 2, "env_drift")
        auto_retry.note_rejection(ctx, drifted, "env_drift")
        assert auto_retry.take_due(ctx) is None  # not before another candidate was measured
        ctx.evals = 2
        again = auto_retry.take_due(ctx)
        assert again is not None and again.parent_id == root.id and again.move_id == "m"
        assert again.hypothesis.startswith(f"retry of node {drifted.id} (was env_drift)") and again.state == "proposed"
        assert store.get_artifact(again.artifact_sha).rstrip("\n") == store.get_artifact(drifted.artifact_sha).rstrip("\n")
        assert [e.agent for e in store.events(camp.id, limit=10, kinds=["retry"])] == ["critic"]
        assert auto_retry.take_due(ctx) is None  # once
        store.transition(again.id, "rejected", diagnosis="env_drift", reason="noise again")
        auto_retry.note_rejection(ctx, store.get_node(again.id), "env_drift")
        ctx.evals = 5
        assert auto_retry.take_due(ctx) is None  # a retry is never retried
    finally:
        store.close()


def test_only_the_machines_noise_and_only_with_budget_left(tmp_path):
    store, camp, root = _campaign(tmp_path)
    try:
        ctx = _Ctx(store, camp, cap=2)
        regression = _rejected(store, camp, root, 2, "regression")
        auto_retry.note_rejection(ctx, regression, "regression")
        auto_retry.note_rejection(ctx, root, "env_drift")  # the baseline is never retried this way
        unstable = _rejected(store, camp, root, 3, "unstable")
        auto_retry.note_rejection(ctx, unstable, "unstable")
        ctx.evals = 2
        assert auto_retry.take_due(ctx) is None  # the budget is spent
        ctx.cap = None
        again = auto_retry.take_due(ctx)
        assert again is not None and f"retry of node {unstable.id}" in again.hypothesis
        assert auto_retry.take_due(ctx) is None
    finally:
        store.close()


def test_a_resumed_campaign_retries_what_the_dead_process_had_not(tmp_path):
    store, camp, root = _campaign(tmp_path)
    try:
        done = _rejected(store, camp, root, 2, "env_drift")
        auto_retry.take_due(_Ctx(store, camp, retries_due={done.id: 0}))  # retried before the crash
        waiting = _rejected(store, camp, root, 3, "env_drift")  # rejected just before it
        fresh = _Ctx(store, camp)  # a new process: nothing in memory
        again = auto_retry.take_due(fresh)
        assert again is not None and f"retry of node {waiting.id}" in again.hypothesis
        assert auto_retry.take_due(fresh) is None
    finally:
        store.close()
