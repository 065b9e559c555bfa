"""One streaming request against an OpenAI-compatible server, timed token by token.

Works with ``/v1/completions`` (``choices[0].text``) and ``/v1/chat/completions``
(``choices[0].delta.content``), as served by vLLM, SGLang and the bundled tiny server. Timing is
taken on the client with ``perf_counter`` when each server-sent event *arrives*:

* TTFT — request sent → first event that carries generated text;
* ITL — gaps between consecutive text events (one event may carry several tokens);
* E2E — request sent → end of the stream;
* TPOT — ``(E2E − TTFT) / (output_tokens − 1)`` (undefined for a single token).

The output-token count comes from the server's streamed ``usage`` when it sends one
(``stream_options.include_usage``), otherwise from the number of text events — the usage is
preferred because a server may pack several tokens into one event.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx

from .workload import RequestSpec

_ERR_LIMIT = 300


@dataclass
class RequestResult:
    ok: bool
    error: str | None = None
    status: int | None = None
    start: float = 0.0  # perf_counter at send
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    output_tokens: int = 0
    input_tokens: int | None = None
    usage_reported: bool = False
    events: int = 0
    requested_tokens: int = 0
    text: str = ""

    @property
    def tpot_s(self) -> float | None:
        if not self.ok or self.ttft_s is None or self.e2e_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def endpoint(api: str) -> str:
    if api == "chat":
        return "/v1/chat/completions"
    if api == "completions":
        return "/v1/completions"
    raise ValueError(f"unknown api {api!r}: use 'completions' or 'chat'")


def build_body(req: RequestSpec, api: str, model: str, *, stream: bool = True, temperature: float = 0.0,
               ignore_eos: bool = True, extra: dict | None = None, logprobs: int | None = None) -> dict:
    body: dict = {"model": model, "max_tokens": req.max_tokens, "temperature": temperature, "stream": stream}
    if api == "chat":
        body["messages"] = req.messages if req.messages is not None else [{"role": "user", "content": req.prompt}]
        if logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = logprobs
    else:
        body["prompt"] = req.prompt if req.prompt is not None else " ".join(
            str(m.get("content", "")) for m in req.messages or [])
        if logprobs:
            body["logprobs"] = logprobs
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM / SGLang extension: produce exactly max_tokens
    body.update(extra or {})
    return body


def _event_text(chunk: dict, api: str) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if api == "chat":
        delta = c.get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return c.get("text") or ""


async def stream_request(client: httpx.AsyncClient, base_url: str, api: str, body: dict,
                         timeout_s: float) -> RequestResult:
    """Send one streaming request; never raises for a server-side problem (that is data)."""
    res = RequestResult(ok=False, requested_tokens=int(body.get("max_tokens") or 0))
    url = base_url.rstrip("/") + endpoint(api)
    parts: list[str] = []
    last = None
    res.start = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body, timeout=timeout_s) as resp:
            res.status = resp.status_code
            if resp.status_code != 200:
                raw = (await resp.aread()).decode("utf-8", "replace")
                res.error = f"HTTP {resp.status_code}: {raw.strip()[:_ERR_LIMIT]}"
                return res
            done = False
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                now = time.perf_counter()
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    res.error = f"malformed stream event: {payload[:80]!r}"
                    return res
                if "error" in chunk and not chunk.get("choices"):
                    err = chunk["error"]
                    res.error = f"server error in stream: {str(err.get('message', err) if isinstance(err, dict) else err)[:_ERR_LIMIT]}"
                    return res
                usage = chunk.get("usage")
                if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
                    res.output_tokens = int(usage["completion_tokens"])
                    if usage.get("prompt_tokens") is not None:
                        res.input_tokens = int(usage["prompt_tokens"])
                    res.usage_reported = True
                text = _event_text(chunk, api)
                if not text:
                    continue
                if last is None:
                    res.ttft_s = now - res.start
                else:
                    res.itl_s.append(now - last)
                last = now
                res.events += 1
                parts.append(text)
            res.e2e_s = time.perf_counter() - res.start
            if not done and res.events == 0:
                res.error = "stream ended without any generated text"
                return res
    except httpx.TimeoutException:
        res.error = f"timed out after {timeout_s:g} s"
        return res
    except httpx.HTTPError as exc:
        res.error = f"{type(exc).__name__}: {str(exc)[:_ERR_LIMIT] or 'connection failed'}"
        return res
    if res.events == 0:
        res.error = "no generated text in the response"
        return res
    if not res.usage_reported:
        res.output_tokens = res.events
    res.text = "".join(parts)
    res.ok = True
    return res


@dataclass
class Completion:
    """A non-streaming greedy completion with per-token log-probabilities (accuracy probe)."""

    ok: bool
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    error: str | None = None

    def to_dict(self) -> dict:
        return {"ok": self.ok, "tokens": self.tokens, "logprobs": self.logprobs, "text": self.text,
                "error": self.error}


async def complete_with_logprobs(client: httpx.AsyncClient, base_url: str, api: str, body: dict,
                                 timeout_s: float) -> Completion:
    url = base_url.rstrip("/") + endpoint(api)
    try:
        resp = await client.post(url, json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return Completion(False, error=f"{type(exc).__name__}: {exc}"[:_ERR_LIMIT])
    if resp.status_code != 200:
        return Completion(False, error=f"HTTP {resp.status_code}: {resp.text[:_ERR_LIMIT]}")
    try:
        choice = resp.json()["choices"][0]
        lp = choice.get("logprobs") or {}
        if api == "chat":
            content = lp.get("content") or []
            tokens = [str(t.get("token", "")) for t in content]
            logprobs = [float(t.get("logprob", 0.0)) for t in content]
            text = (choice.get("message") or {}).get("content") or ""
        else:
            tokens = [str(t) for t in lp.get("tokens") or []]
            logprobs = [float(x) if x is not None else 0.0 for x in lp.get("token_logprobs") or []]
            text = choice.get("text") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return Completion(False, error=f"unexpected response shape: {exc}"[:_ERR_LIMIT])
    return Completion(True, tokens, logprobs, text)
