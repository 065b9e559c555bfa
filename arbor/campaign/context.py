"""Everything one campaign process holds while it runs.

Graph state stays tiny (ids and counters); the heavy collaborators live here and are closed
over by the graph's step functions, so LangGraph checkpoints never grow with the tree.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from arbor.agents.contracts import Critic, Orchestrator, Selection, Specialist
from arbor.agents.priors import RISE_ALL
from arbor.sandbox.runner import Runner
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.records import CampaignRecord
from arbor.search_tree.store import Store
from arbor.spec import CampaignSpec

from arbor.targets import TargetAdapter

from .knowledge import KnowledgeCache
from .measurer import Measurer
from .speed_of_light import SolCache


@dataclass
class Context:
    spec: CampaignSpec
    store: Store
    campaign: CampaignRecord
    target: TargetAdapter
    runner: Runner
    critic: Critic
    orchestrator: Orchestrator
    specialist: Specialist
    report: Callable[[str, dict], None]
    owner: str = field(default_factory=lambda: f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
    started: float = field(default_factory=time.monotonic)
    last_mark: float = field(default_factory=time.monotonic)
    heartbeat_s: float = 5.0
    noise_floor: float = 0.0  # from the baseline's A/A measurement (restored from events on resume)
    selection: Selection | None = None  # the orchestrator's pick, handed from select to propose
    index: TreeIndex | None = None  # incremental tree statistics (built on first use)
    llm: object | None = None  # LLMRuntime when any agent role uses an LLM (token/cost/failure stops)
    lease_lost: bool = False  # set by the heartbeat when another run took the campaign over
    # how it measures: serial.SerialMeasurer, or parallel.Parallel when executor.workers > 1; set by
    # run.build_context, so every step reads straight through it
    measurer: Measurer = None  # type: ignore[assignment]
    knowledge: KnowledgeCache = field(default_factory=KnowledgeCache)  # knowledge.py's reads, per process
    step_walls: list[float] = field(default_factory=list)  # wall seconds of this process's steps (timing.py)
    step_started: float | None = None
    speed_of_light: SolCache = field(default_factory=SolCache)  # speed_of_light.for_context's, per process
    retries_due: dict[int, int] | None = None  # auto_retry.py: rejected node -> evaluations before its retry

    def __post_init__(self) -> None:
        if self.index is None:
            self.index = TreeIndex(self.campaign.id)
            # before the index loads anything: outcome priors see every finished node (a resumed
            # campaign's earlier ones, the baseline), so a resume replays them exactly
            self.orchestrator.follow(self.index)
    _sources: dict[str, str] = field(default_factory=dict)
    _evaluations: int | None = None  # candidates measured so far (the budget's count), kept as we go
    _clock: threading.Lock = field(default_factory=threading.Lock)  # loop and heartbeat both flush

    def set_noise_floor(self, noise_floor: float) -> None:
        """The baseline's A/A noise: the Critic's bar for every later candidate, and so what the
        orchestrator's family posteriors count as a win (``OutcomeIndex.set_win_bar``): a member
        the Critic will call ``no_gain`` must not make its siblings look like winners."""
        self.noise_floor = noise_floor
        outcomes = self.orchestrator.outcome_index()
        bar = max(self.critic.config.min_speedup, 1.0 + max(noise_floor, 0.0))
        if outcomes is not None and outcomes.set_win_bar(bar):
            self.orchestrator.priors_may_rise(RISE_ALL)

    def evaluations(self) -> int:
        """Distinct candidates measured: counted in the store once per process, then incremented
        by this process (the only writer while it holds the campaign) instead of a COUNT(DISTINCT)
        over every measurement at every step."""
        if self._evaluations is None:
            self._evaluations = self.store.measurement_count(self.cid, distinct_candidates=True)
        return self._evaluations

    def count_evaluation(self) -> None:
        if self._evaluations is not None:
            self._evaluations += 1

    @property
    def cid(self) -> int:
        return self.campaign.id

    def source(self, sha: str) -> str:
        """Artifacts are immutable, so a per-process cache is always correct."""
        if sha not in self._sources:
            self._sources[sha] = self.store.get_artifact(sha)
        return self._sources[sha]

    def flush_elapsed(self) -> float:
        """Persist wall time as we go: a kill -9 loses at most one step of it."""
        with self._clock:
            now = time.monotonic()
            total = self.store.add_elapsed(self.cid, now - self.last_mark)
            self.last_mark = now
            return total
