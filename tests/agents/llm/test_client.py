"""The LLM client against a real HTTP server: structured-output modes, repair, retries, budgets,
audit events, and the fault matrix (malformed JSON, schema violations, empty choices, 429 with
Retry-After, 5xx, timeouts, 5 MB replies, a dead server)."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from pydantic import BaseModel

from arbor.agents.llm import (
    BudgetConfig,
    LLMBudgetExceeded,
    LLMInvalidOutput,
    LLMRejected,
    LLMRuntime,
    LLMUnavailable,
    Price,
    RoleConfig,
)
from arbor.agents.llm.audit import unpack

from .scripted_server import Action, ScriptedServer, ok, raw, status

KEY = "sk-test-5f0c1e-SECRET-never-store-me"


class Answer(BaseModel):
    value: int
    note: str


GOOD = {"value": 7, "note": "fine"}


def make(server: ScriptedServer, *, mode="auto", retries=3, timeout=5.0, max_tokens=None, max_cost=None,
         price=Price(), max_reply=1_000_000, key_env=None, max_out=512):
    rt = LLMRuntime(BudgetConfig(max_tokens=max_tokens, max_cost_usd=max_cost, max_failures_in_row=3))
    cfg = RoleConfig(role="specialist", model="scripted-model", base_url=server.url, api_key_env=key_env,
                     structured_output=mode, max_retries=retries, timeout_s=timeout, backoff_s=0.05,
                     max_backoff_s=0.2, max_output_tokens=max_out, price=price, max_reply_chars=max_reply)
    return rt, rt.client(cfg, "tester")


MSGS = [{"role": "system", "content": "You answer with JSON."}, {"role": "user", "content": "Give me a value."}]


def statuses(rt: LLMRuntime) -> list[str]:
    return [e.payload["status"] for e in rt.memory_events]


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


def test_valid_reply_is_parsed_and_audited(server, monkeypatch):
    monkeypatch.setenv("ARBOR_TEST_KEY", KEY)
    rt, client = make(server, key_env="ARBOR_TEST_KEY", price=Price(1.0, 2.0))
    server.push(ok(GOOD, usage=(100, 20)))
    reply = client.call(MSGS, Answer, purpose="unit")
    assert reply.value == Answer(**GOOD) and not reply.repaired and reply.mode == "json_schema"
    req = server.chat_requests()[0]
    assert req.headers["authorization"] == f"Bearer {KEY}"  # the key is used...
    assert req.body["response_format"]["json_schema"]["name"] == "Answer"
    assert req.body["max_tokens"] == 512
    (ev,) = rt.memory_events
    assert (ev.prompt_tokens, ev.completion_tokens) == (100, 20)
    assert ev.cost_usd == pytest.approx(0.1 + 0.04)
    assert unpack(ev.payload["prompt_z"])[1]["content"] == "Give me a value."
    assert json.loads(unpack(ev.payload["reply_z"])) == GOOD
    assert KEY not in json.dumps([e.payload for e in rt.memory_events])  # ...and never stored


def test_auto_mode_steps_down_and_pins_the_mode(server):
    rt, client = make(server)
    server.push(status(400, "response_format json_schema is not supported"), ok(GOOD), ok(GOOD))
    assert client.call(MSGS, Answer, purpose="unit").mode == "tools"
    assert client.call(MSGS, Answer, purpose="unit").value.value == 7
    modes = [r.mode for r in server.chat_requests()]
    assert modes == ["json_schema", "tools", "tools"]  # remembered: no second probe
    assert statuses(rt) == ["retry", "ok", "ok"]


@pytest.mark.parametrize("mode", ["json_object", "text"])
def test_prompted_modes_put_the_schema_in_the_prompt_and_parse_fenced_json(server, mode):
    rt, client = make(server, mode=mode)
    server.push(raw("Sure! Here it is:\n```json\n" + json.dumps(GOOD) + "\n```\nAnything else?"))
    assert client.call(MSGS, Answer, purpose="unit").value.value == 7
    req = server.chat_requests()[0]
    assert req.mode == ("json_object" if mode == "json_object" else "text")
    assert '"title":"Answer"' in req.text


@pytest.mark.parametrize("bad", [raw('{"value": 7, "note": '), ok({"value": "seven"}), Action(empty_choices=True),
                                 Action(raw_body=b"<html>proxy says hi</html>", content_type="text/html")],
                         ids=["malformed-json", "schema-violation", "empty-choices", "html-body"])
def test_one_repair_request_fixes_an_invalid_reply(server, bad):
    rt, client = make(server)
    server.push(bad, ok(GOOD))
    reply = client.call(MSGS, Answer, purpose="unit")
    assert reply.repaired and reply.value.value == 7
    assert statuses(rt) == ["invalid", "ok"]
    repair = server.chat_requests()[1].messages
    assert repair[-1]["role"] == "user" and "could not be used" in repair[-1]["content"]
    assert rt.memory_events[0].payload["error"]


def test_second_invalid_reply_gives_up_and_counts_a_failure(server):
    rt, client = make(server)
    server.push(ok({"value": 1}), ok({"note": "x"}))
    with pytest.raises(LLMInvalidOutput, match="schema violation"):
        client.call(MSGS, Answer, purpose="unit")
    assert len(server.chat_requests()) == 2  # exactly one repair, never more
    assert rt.state().failures_in_row == 1


def test_semantic_check_failures_are_repaired_too(server):
    rt, client = make(server)
    server.push(ok({"value": 99, "note": "x"}), ok(GOOD))

    def check(a: Answer) -> None:
        if a.value > 10:
            raise ValueError("value must be at most 10")

    assert client.call(MSGS, Answer, purpose="unit", check=check).value.value == 7
    assert "value must be at most 10" in server.chat_requests()[1].messages[-1]["content"]


def test_429_honours_retry_after(server):
    rt, client = make(server)
    server.push(status(429, "slow down", "rate_limit_exceeded", headers={"Retry-After": "1"}), ok(GOOD))
    client.call(MSGS, Answer, purpose="unit")
    first, second = server.chat_requests()
    assert second.t - first.t >= 0.95
    retry = rt.memory_events[0].payload
    assert retry["status"] == "retry" and retry["wait_s"] == pytest.approx(1.0) and "429" in retry["error"]


def test_5xx_and_dropped_connections_are_retried_with_backoff(server):
    rt, client = make(server)
    server.push(status(500, "boom"), status(502, "bad gateway"), Action(drop_connection=True), ok(GOOD))
    assert client.call(MSGS, Answer, purpose="unit").value.value == 7
    assert statuses(rt) == ["retry", "retry", "retry", "ok"]
    waits = [e.payload["wait_s"] for e in rt.memory_events[:3]]
    assert all(0.02 <= w <= 0.2 for w in waits) and waits[1] > waits[0] * 0.9  # doubling, with jitter


def test_timeouts_are_retried(server):
    rt, client = make(server, timeout=0.3)
    server.push(ok(GOOD, delay_s=1.5), ok(GOOD))
    assert client.call(MSGS, Answer, purpose="unit").value.value == 7
    assert "timed out" in rt.memory_events[0].payload["error"]


def test_a_request_never_waits_past_the_campaign_s_wall_budget(server):
    """Under load 16 a 300 s request timeout ran a 600 s campaign to 828 s: the timeout is capped by
    the wall time left, and with under MIN_CALL_S left nothing is sent at all."""
    rt, client = make(server, timeout=30.0, retries=3)
    deadline = time.monotonic() + 5.5
    rt.time_left = lambda: deadline - time.monotonic()
    server.push(ok(GOOD, delay_s=7.0))
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailable):
        client.call(MSGS, Answer, purpose="unit")
    assert time.monotonic() - t0 < 8.0  # not the 30 s timeout, nor 4 attempts of it
    first = rt.memory_events[0].payload
    assert re.search(r"timed out after [56] s \(the campaign's wall budget left\)", first["error"])
    sent = len(server.chat_requests())
    rt.time_left = lambda: 2.0
    with pytest.raises(LLMUnavailable, match="wall budget has 2 s left: no request sent"):
        client.call(MSGS, Answer, purpose="unit")
    assert len(server.chat_requests()) == sent
    rt.time_left = lambda: 1000.0  # plenty left: the role's own timeout applies, and the call works
    server.push(ok(GOOD))
    assert client.call(MSGS, Answer, purpose="unit").value.value == 7


def test_five_megabyte_reply_is_refused_and_stored_capped(server):
    rt, client = make(server, max_reply=200_000)
    server.push(raw("x" * 5_000_000), ok(GOOD))
    assert client.call(MSGS, Answer, purpose="unit").repaired
    big = rt.memory_events[0].payload
    assert big["status"] == "invalid" and big["reply_chars"] == 5_000_000 and big["reply_truncated"]
    assert len(json.dumps(big)) < 100_000
    assert "characters, over the" in big["error"]


def test_dead_server_is_unavailable_after_retries():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    rt = LLMRuntime(BudgetConfig())
    cfg = RoleConfig(role="critic", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2,
                     backoff_s=0.01, max_backoff_s=0.05, timeout_s=2)
    client = rt.client(cfg, "tester")
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailable, match="after 3 attempt"):
        client.call(MSGS, Answer, purpose="unit")
    assert time.monotonic() - t0 < 5
    assert statuses(rt) == ["retry", "retry", "error"]
    assert "prompt_z" in rt.memory_events[0].payload  # the prompt is audited even when nothing answered
    assert rt.state().failures_in_row == 1


@pytest.mark.parametrize("reply", [status(401, f"Incorrect API key provided: {KEY}", "invalid_api_key"),
                                   status(429, "You exceeded your current quota", "insufficient_quota"),
                                   status(404, "The model `nope` does not exist", "model_not_found")],
                         ids=["401", "quota", "404"])
def test_non_retryable_errors_fail_fast_without_leaking_the_key(server, monkeypatch, reply):
    monkeypatch.setenv("ARBOR_TEST_KEY", KEY)
    rt, client = make(server, key_env="ARBOR_TEST_KEY")
    server.push(reply)
    with pytest.raises(LLMRejected) as exc:
        client.call(MSGS, Answer, purpose="unit")
    assert len(server.chat_requests()) == 1
    assert KEY not in str(exc.value) and KEY not in json.dumps([e.payload for e in rt.memory_events])


def test_unsupported_max_tokens_is_renamed(server):
    rt, client = make(server)
    server.push(status(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                            "Use 'max_completion_tokens' instead."), ok(GOOD), ok(GOOD))
    client.call(MSGS, Answer, purpose="unit")
    client.call(MSGS, Answer, purpose="unit")
    bodies = [r.body for r in server.chat_requests()]
    assert "max_tokens" in bodies[0] and "max_completion_tokens" in bodies[1] and "max_tokens" not in bodies[2]
    assert bodies[1]["response_format"]["type"] == "json_schema"  # the mode was not the problem


def test_token_budget_is_enforced_to_the_token(server):
    rt, client = make(server, max_tokens=800, max_out=300)
    server.responder = lambda req: ok(GOOD)
    calls = 0
    with pytest.raises(LLMBudgetExceeded, match="max_tokens=800"):
        while True:
            client.call(MSGS, Answer, purpose="unit")
            calls += 1
    used = sum(p + c for p, c in server.usage_sent)
    assert calls == len(server.chat_requests()) >= 2  # the refused call never reached the server
    assert rt.budget.tokens == used <= 800
    assert sum(e.prompt_tokens + e.completion_tokens for e in rt.memory_events) == used
    # every request's completion allowance fit in what was left at the time
    left = 800
    for req, (p, c) in zip(server.chat_requests(), server.usage_sent):
        assert req.max_tokens <= left - p
        left -= p + c
    assert rt.state().usage.exhausted.startswith("budget: LLM")


def test_cost_budget_caps_the_completion_allowance(server):
    rt, client = make(server, max_cost=0.01, price=Price(prompt_per_1k=0.01, completion_per_1k=0.1), max_out=4096)
    server.push(ok(GOOD, usage=(100, 50)))
    client.call(MSGS, Answer, purpose="unit")
    assert rt.budget.cost_usd == pytest.approx(0.001 + 0.005)
    # what is left ($0.004 minus the prompt estimate) buys well under 4096 completion tokens
    assert server.chat_requests()[0].max_tokens < 100
    with pytest.raises(LLMBudgetExceeded):
        client.call(MSGS, Answer, purpose="unit")
    assert len(server.chat_requests()) == 1


def test_missing_usage_is_estimated_and_flagged(server):
    rt, client = make(server)
    server.push(ok(GOOD, usage=None))
    client.call(MSGS, Answer, purpose="unit")
    ev = rt.memory_events[0]
    assert ev.payload["usage_estimated"] and ev.prompt_tokens > 0 and ev.completion_tokens > 0
