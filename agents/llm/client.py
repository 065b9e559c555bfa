"""One agent role's connection to an OpenAI-compatible endpoint (openai SDK, chat completions).

``LLMClient.call`` turns a conversation and a pydantic model into a validated instance:

1. plan the call against the campaign budget (the request's ``max_tokens`` is cut to fit);
2. send it; 429 (honouring Retry-After), 408/409, 5xx, timeouts and refused connections are
   retried with exponential backoff and jitter (the SDK's own retries are off, so every attempt
   is visible as an event); a 400/422 caused by the structured-output mode steps ``auto`` down to
   the next mode, one caused by ``max_tokens``/``temperature`` adapts the parameter;
3. parse and validate the reply; an invalid one gets exactly one repair request that quotes the
   problem back to the model.

Every HTTP exchange is stored as an ``llm_call`` event with token counts, cost and (compressed,
redacted) prompt and reply, so a campaign's agent traffic can be audited and replayed.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import openai
from pydantic import BaseModel

from .audit import Redactor, cap, pack, safe_url
from .budget import LLMBudget, approx_tokens
from .config import STRUCTURED_MODES, RoleConfig
from .errors import LLMBudgetExceeded, LLMError, LLMInvalidOutput, LLMRejected, LLMUnavailable
from .structured import InvalidReply, instructions, needs_instructions, parse_reply, reply_text, request_kwargs

T = TypeVar("T", bound=BaseModel)
RETRYABLE_STATUS = {408, 409, 429}
REPAIR_ECHO_CHARS = 8000
# The least wall time worth sending a request with: a campaign with less left stops rather than
# wait on a reply it has no time to measure.
MIN_CALL_S = 5.0


@dataclass
class CallEvent:
    """What the runtime writes to the store for one HTTP exchange (or one refused attempt)."""

    agent: str
    node_id: int | None
    payload: dict
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    kind: str = "llm_call"


@dataclass
class Reply(Generic[T]):
    value: T
    event_id: int | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    mode: str
    repaired: bool


@dataclass
class _Exchange:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    finish_reason: str | None
    usage_estimated: bool
    latency_s: float
    problem: str | None = None  # why the body itself is unusable (no choices, not a completion)


class _StepDown(Exception):
    """The endpoint rejected the current structured-output mode."""


@dataclass
class Streak:
    """Consecutive LLM calls that ended without a usable answer (a stop condition)."""

    failures: int = 0
    last: str | None = None

    def ok(self) -> None:
        self.failures, self.last = 0, None

    def fail(self, why: str) -> None:
        self.failures += 1
        self.last = why


class LLMClient:
    def __init__(self, cfg: RoleConfig, agent: str, budget: LLMBudget,
                 sink: Callable[[CallEvent], int | None], redactor: Redactor, streak: Streak,
                 api_key: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 time_left: Callable[[], float | None] = lambda: None):
        self.cfg = cfg
        # the campaign's wall budget left (None: unbounded). A request's timeout is capped by it:
        # a 300 s timeout under load once ran a 600 s campaign to 828 s.
        self._time_left = time_left
        self.agent = agent
        self.budget = budget
        self.sink = sink
        self.redact = redactor
        self.streak = streak
        self._sleep = sleep
        self._rng = random.Random(f"{cfg.seed}:{cfg.role}")
        self.mode: str | None = None if cfg.auto else cfg.structured_output
        self._modes = list(STRUCTURED_MODES) if cfg.auto else [cfg.structured_output]
        self._max_tokens_param = "max_tokens"
        self._send_temperature = cfg.temperature is not None
        redactor.add(api_key)
        # the key lives only inside the SDK client; local servers (vLLM, Ollama...) take any string
        self._sdk = openai.OpenAI(api_key=api_key or "not-needed", base_url=cfg.base_url,
                                  timeout=cfg.timeout_s, max_retries=0)
        self.endpoint = safe_url(str(self._sdk.base_url))

    # --- public -------------------------------------------------------------------------
    def call(self, messages: list[dict], schema: type[T], *, purpose: str, node_id: int | None = None,
             check: Callable[[T], None] | None = None) -> Reply[T]:
        call_id = uuid.uuid4().hex[:12]
        convo = list(messages)
        last: InvalidReply | None = None
        for phase in ("first", "repair"):
            try:
                ex, mode, meta = self._send(convo, schema, purpose, call_id, phase, node_id)
            except LLMBudgetExceeded:
                raise
            except LLMError as err:
                self.streak.fail(f"{self.agent}: {err}")
                raise
            status, error = "ok", None
            try:
                if ex.problem:
                    raise InvalidReply(ex.problem)
                if len(ex.text) > self.cfg.max_reply_chars:
                    raise InvalidReply(f"the reply has {len(ex.text)} characters, over the "
                                       f"{self.cfg.max_reply_chars} limit; reply with far less text")
                value = parse_reply(ex.text, schema, check)
            except InvalidReply as err:
                status, error, value = "invalid", str(err), None
                if ex.finish_reason == "length":
                    error += " (the reply was cut off at the max_tokens limit: be shorter)"
            eid = self._record(node_id, ex, meta, status=status, error=error)
            if value is not None:
                self.mode = mode
                self.streak.ok()
                return Reply(value, eid, ex.prompt_tokens, ex.completion_tokens, ex.cost_usd, mode,
                             repaired=phase == "repair")
            last = InvalidReply(error)
            echo, _ = cap(ex.text, REPAIR_ECHO_CHARS)
            convo = list(messages) + [
                {"role": "assistant", "content": echo or "(empty reply)"},
                {"role": "user", "content": f"That reply could not be used: {error}. Reply again with only "
                                            "the JSON object, matching the schema exactly."},
            ]
        why = f"{purpose}: invalid output after one repair request: {last}"
        self.streak.fail(f"{self.agent}: {why}")
        raise LLMInvalidOutput(self.redact(why))

    # --- one logical request (all modes and transport retries) ---------------------------
    def _send(self, convo: list[dict], schema: type[BaseModel], purpose: str, call_id: str, phase: str,
              node_id: int | None) -> tuple[_Exchange, str, dict]:
        prompt_pending = True  # the prompt is stored once per phase, on its first event
        while True:
            mode = self.mode or self._modes[0]
            messages = list(convo)
            if needs_instructions(mode):
                messages.append({"role": "system", "content": instructions(schema)})
            kwargs: dict[str, Any] = {"model": self.cfg.model, "messages": messages, **request_kwargs(mode, schema)}
            if self._send_temperature:
                kwargs["temperature"] = self.cfg.temperature
            if self.cfg.seed is not None:
                kwargs["seed"] = self.cfg.seed
            est = approx_tokens(json.dumps({k: v for k, v in kwargs.items() if k != "model"}, default=str))
            kwargs[self._max_tokens_param] = self.budget.plan(est, self.cfg.max_output_tokens, self.cfg.price)
            base = {"role": self.cfg.role, "purpose": purpose, "call_id": call_id, "phase": phase, "mode": mode,
                    "model": self.cfg.model, "endpoint": self.endpoint, "prompt_estimate": est}
            if prompt_pending:
                base["prompt_z"] = pack(self.redact.scrub(messages))
                base["prompt_chars"] = sum(len(str(m.get("content", ""))) for m in messages)
            try:
                ex, meta = self._transport(kwargs, base, node_id)
                return ex, mode, meta
            except _StepDown:
                prompt_pending = "prompt_z" in base
                continue

    def _transport(self, kwargs: dict, base: dict, node_id: int | None) -> tuple[_Exchange, dict]:
        """Send one request, retrying transport failures. ``base`` loses its prompt once an
        event has carried it."""
        attempts = self.cfg.max_retries + 1
        adapted = 0
        attempt = 0
        while True:
            attempt += 1
            meta = {**base, "attempt": attempt, "max_tokens": kwargs.get(self._max_tokens_param)}
            timeout, capped = self._timeout(node_id, meta, base)
            t0 = time.monotonic()
            try:
                resp = self._sdk.chat.completions.create(**kwargs, timeout=timeout)
                return self._exchange(resp, base["prompt_estimate"], time.monotonic() - t0), meta
            except openai.APIStatusError as err:
                status, detail = err.status_code, self._detail(err)
                if status in (400, 422) and adapted < 3 and self._adapt(kwargs, detail, meta, base, node_id):
                    adapted += 1
                    attempt -= 1
                    continue
                if status == 429 and "insufficient_quota" in detail:
                    self._fail_event(node_id, meta, base, f"HTTP 429: {detail}", final=True)
                    raise LLMRejected(self.redact(f"{self.agent}: HTTP 429 insufficient quota at {self.endpoint} "
                                                  f"— top up the account ({detail[:200]})")) from None
                if status not in RETRYABLE_STATUS and status < 500:
                    self._fail_event(node_id, meta, base, f"HTTP {status}: {detail}", final=True)
                    raise LLMRejected(self.redact(f"{self.agent}: {self.endpoint} refused the request with "
                                                  f"HTTP {status}: {detail[:300]}")) from None
                error = f"HTTP {status}: {detail}"
                wait = self._retry_after(err.response.headers) if status in (429, 503) else None
                wait = self._backoff(attempt) if wait is None else wait
            except openai.APITimeoutError:
                error, wait = f"timed out after {timeout:.0f} s", self._backoff(attempt)
                if capped:
                    error += " (the campaign's wall budget left)"
            except openai.APIConnectionError as err:
                cause = err.__cause__ or err
                error, wait = f"connection failed: {type(cause).__name__}: {cause}", self._backoff(attempt)
            except openai.APIError as err:  # a response the SDK could not validate: treat as transient
                error, wait = f"bad response: {type(err).__name__}: {err}", self._backoff(attempt)
            left = self._time_left()
            final = attempt >= attempts or (left is not None and left - wait < MIN_CALL_S)
            meta["latency_s"] = round(time.monotonic() - t0, 3)
            self._fail_event(node_id, meta, base, error, final=final, wait_s=None if final else round(wait, 3))
            if final:
                raise LLMUnavailable(self.redact(f"{self.agent}: {self.endpoint} gave no answer after "
                                                 f"{attempts} attempt(s); last: {error[:300]}"))
            self._sleep(wait)

    # --- helpers ------------------------------------------------------------------------
    def _timeout(self, node_id: int | None, meta: dict, base: dict) -> tuple[float, bool]:
        """This request's timeout: the role's, capped by the campaign's wall budget left; with
        less than ``MIN_CALL_S`` left nothing is sent."""
        left = self._time_left()
        if left is None or left >= self.cfg.timeout_s:
            return self.cfg.timeout_s, False
        if left < MIN_CALL_S:
            why = f"the campaign's wall budget has {max(left, 0):.0f} s left: no request sent"
            self._fail_event(node_id, meta, base, why, final=True)
            raise LLMUnavailable(f"{self.agent}: {why}")
        return left, True

    def _exchange(self, resp: Any, est: int, latency: float) -> _Exchange:
        text, finish, problem = "", None, None
        if isinstance(resp, (str, bytes)):  # the SDK hands back bodies it could not parse as JSON
            text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp
            problem = f"the server answered with a body that is not a chat completion: {text[:200]!r}"
        elif not getattr(resp, "choices", None):
            problem = "the server returned no choices"
        else:
            text, finish = reply_text(resp.choices[0].message), resp.choices[0].finish_reason
        usage = getattr(resp, "usage", None)
        p = getattr(usage, "prompt_tokens", None) if usage else None
        c = getattr(usage, "completion_tokens", None) if usage else None
        estimated = p is None or c is None
        p = int(p) if p is not None else est
        c = int(c) if c is not None else approx_tokens(text)
        cost = self.cfg.price.cost(p, c)
        self.budget.charge(p, c, cost)
        return _Exchange(text, p, c, cost, finish, estimated, latency, problem)

    def _record(self, node_id: int | None, ex: _Exchange, meta: dict, *, status: str, error: str | None) -> int | None:
        stored, truncated = cap(ex.text)
        payload = {**meta, "status": status, "latency_s": round(ex.latency_s, 3), "finish_reason": ex.finish_reason,
                   "reply_chars": len(ex.text), "reply_truncated": truncated, "reply_z": pack(self.redact(stored))}
        if ex.usage_estimated:
            payload["usage_estimated"] = True
        if error:
            payload["error"] = self.redact(error[:2000])
        return self.sink(CallEvent(self.agent, node_id, payload, ex.prompt_tokens, ex.completion_tokens, ex.cost_usd))

    def _fail_event(self, node_id: int | None, meta: dict, base: dict, error: str, *, final: bool,
                    wait_s: float | None = None) -> None:
        payload = {**meta, "status": "error" if final else "retry", "error": self.redact(error[:2000])}
        if wait_s is not None:
            payload["wait_s"] = wait_s
        self.sink(CallEvent(self.agent, node_id, payload))
        base.pop("prompt_z", None)
        base.pop("prompt_chars", None)

    def _adapt(self, kwargs: dict, detail: str, meta: dict, base: dict, node_id: int | None) -> bool:
        """Make the request acceptable to this endpoint; False when nothing can be changed.
        Raises _StepDown when ``auto`` should try the next structured-output mode."""
        low = detail.lower()
        if ("context" in low and ("length" in low or "window" in low)) or \
                ("model" in low and ("not found" in low or "does not exist" in low)):
            return False
        if "max_completion_tokens" in low and self._max_tokens_param == "max_tokens":
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            self._max_tokens_param = "max_completion_tokens"
            what = "max_tokens renamed max_completion_tokens"
        elif "temperature" in low and "temperature" in kwargs:
            kwargs.pop("temperature")
            self._send_temperature = False
            what = "temperature dropped"
        elif self.mode is None and self._modes.index(meta["mode"]) + 1 < len(self._modes):
            nxt = self._modes[self._modes.index(meta["mode"]) + 1]
            self._modes = self._modes[self._modes.index(nxt):]
            self._fail_event(node_id, meta, base, f"structured output {meta['mode']!r} refused "
                                                  f"({detail[:300]}); trying {nxt!r}", final=False)
            raise _StepDown()
        else:
            return False
        self._fail_event(node_id, meta, base, f"endpoint refused a parameter ({detail[:300]}): {what}", final=False)
        return True

    @staticmethod
    def _detail(err: openai.APIStatusError) -> str:
        body = err.body
        inner = body.get("error") if isinstance(body, dict) else None
        src = inner if isinstance(inner, dict) else body if isinstance(body, dict) else None
        if src and src.get("message"):
            code = src.get("code") or src.get("type")
            return f"{src['message']} ({code})" if code else str(src["message"])
        return str(err.message)[:500]

    def _backoff(self, attempt: int) -> float:
        base = min(self.cfg.max_backoff_s, self.cfg.backoff_s * (2 ** (attempt - 1)))
        return base * (0.5 + 0.5 * self._rng.random())  # equal jitter: never zero, never in lockstep

    def _retry_after(self, headers: Any) -> float | None:
        """Seconds the server asked us to wait (Retry-After as seconds or an HTTP date, or
        retry-after-ms), capped; None when it gave no usable hint."""
        wait = None
        try:
            if headers.get("retry-after-ms"):
                wait = float(headers["retry-after-ms"]) / 1000.0
            elif headers.get("retry-after"):
                ra = headers["retry-after"]
                try:
                    wait = float(ra)
                except ValueError:
                    wait = email.utils.parsedate_to_datetime(ra).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            wait = None
        if wait is None or wait < 0:
            return None
        return min(wait, self.cfg.max_retry_after_s)
