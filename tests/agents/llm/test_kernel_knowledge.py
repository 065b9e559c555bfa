"""An LLM kernel campaign with a knowledge store: its candidates are recorded with their authors'
hypotheses, and the next campaign on a similar problem is told, in its Specialist's prompt, what
worked there (agents/knowledge/brief.py)."""

from __future__ import annotations

import re

import pytest

from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import load_spec

from tests.arbor.helpers import add_win_problem

from .kernel_script import FOLDED, KernelScript, llm_spec
from .scripted_server import ScriptedServer

pytestmark = pytest.mark.slow

HYPOTHESIS = "fuse the GELU and SiLU chains into two fused kernels"  # what KernelScript's replies say
SECTION = "What similar problems taught (knowledge store)"


def _spec(campaign_dir, name, url, knowledge):  # type: ignore[no-untyped-def]
    path = llm_spec(campaign_dir, name, url, max_evaluations=1, agents="  backend: openai\n",
                    problem=add_win_problem(campaign_dir), sizes="{batch_size: 64, in_features: 256, out_features: 256}")
    path.write_text(path.read_text() + f"knowledge:\n  url: {knowledge}\n")
    return load_spec(path)


def _kernel_prompts(server) -> list[str]:  # type: ignore[no-untyped-def]
    return [m["content"] for r in server.chat_requests() if r.schema_name == "KernelProposals"
            for m in r.messages if m["role"] == "user"]


@pytest.mark.timing  # the similarity reads each run's profile time shares, which a busy machine moves
def test_the_second_campaign_is_told_what_the_first_found(campaign_dir):
    knowledge = f"sqlite:///{campaign_dir / 'knowledge.db'}"
    with ScriptedServer(KernelScript([FOLDED])) as server:
        first = run_campaign(_spec(campaign_dir, "llm-first", server.url, knowledge), lambda *a: None)
        assert first.speedup and first.speedup > 1.0
        assert not any(SECTION in p for p in _kernel_prompts(server))  # nothing known yet
    with ScriptedServer(KernelScript()) as server:
        run_campaign(_spec(campaign_dir, "llm-second", server.url, knowledge), lambda *a: None)
        prompts = _kernel_prompts(server)
    assert prompts and all(SECTION in p for p in prompts)
    # the same problem: similarity near 1 (the signature's time shares come from each run's profile)
    m = re.search(r"^- llm-first \(similarity ([0-9.]+)\): best [0-9.]+x by a written candidate: (.*)$", prompts[0],
                  re.MULTILINE)
    assert m and float(m.group(1)) >= 0.9 and m.group(2) == HYPOTHESIS, prompts[0]
    store = open_store(f"sqlite:///{campaign_dir / 'arbor.db'}")
    camp = store.get_campaign("llm-second")
    (warm,) = store.events(camp.id, limit=100, kinds=["warm_start"])
    store.close()
    assert [n["campaign"] for n in warm.payload["neighbours"]] == ["llm-first"] and not warm.payload["priors"]
