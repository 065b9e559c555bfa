"""The prompts a load run sends: synthetic (seeded lengths) or read from a JSONL dataset.

Synthetic prompts are built from a fixed list of short, common English words, each of which is a
single token in the BPE vocabularies of the usual open models, so ``input_len`` words are close to
``input_len`` prompt tokens on vLLM and SGLang (the server's streamed usage reports the exact
count). The same seed always yields the same prompts, so baseline and candidate see identical
work — and so do two campaigns on two machines.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

# 256 short words; single tokens (with a leading space) in GPT-2/Llama/Qwen-style vocabularies.
WORDS = (
    "the of and to in is was for on are as with his they at be this from have or by one had not "
    "but what all were when we there can an your which their said if do will each about how up out "
    "them then she many some so these would other into has more her two like him see time could no "
    "make than first been its who now people my made over did down only way find use may water long "
    "little very after words called just where most know get through back much before go good new "
    "write our used me man too any day same right look think also around another came come work "
    "three word must because does part even place well such here take why things help put years "
    "different away again off went old number great tell men say small every found still between "
    "name should home big give air line set own under read last never us left end along while might "
    "next sound below saw something thought both few those always looked show large often together "
    "asked house world going want school important until form food keep children feet land side "
    "without boy once animals life enough took sometimes four head above kind began almost live page "
    "got earth need far hand high year mother light parts country father let night following picture "
    "being study second eyes soon times story boys since white days ever paper hard near sentence "
    "better best across during today others however sure means knew"
).split()


@dataclass(frozen=True)
class LengthDist:
    """``mean`` tokens, drawn uniformly from ``[mean·(1−range_ratio), mean·(1+range_ratio)]``."""

    mean: int
    range_ratio: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.range_ratio <= 0:
            return max(1, self.mean)
        lo = max(1, int(round(self.mean * (1 - self.range_ratio))))
        hi = max(lo, int(round(self.mean * (1 + self.range_ratio))))
        return rng.randint(lo, hi)


@dataclass
class RequestSpec:
    """One request body's content: a text ``prompt`` (completions) or ``messages`` (chat)."""

    prompt: str | None
    messages: list[dict] | None
    max_tokens: int
    input_len: int  # intended prompt length in tokens (words for synthetic prompts)
    meta: dict = field(default_factory=dict)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def synthetic_requests(n: int, input_len: LengthDist, output_len: LengthDist, seed: int = 0,
                       prefix_len: int = 0, api: str = "completions") -> list[RequestSpec]:
    """``n`` prompts; ``prefix_len`` words are shared by every prompt (a system prompt), which is
    what prefix caching can reuse; the rest is unique per request."""
    rng = random.Random(seed)
    prefix = _words(random.Random(f"prefix:{seed}"), prefix_len) if prefix_len > 0 else ""
    out = []
    for _ in range(n):
        k = input_len.sample(rng)
        body = _words(rng, max(1, k - prefix_len))
        text = f"{prefix} {body}" if prefix else body
        out.append(_spec(text, output_len.sample(rng), max(k, prefix_len + 1), api))
    return out


def _spec(text: str, max_tokens: int, input_len: int, api: str) -> RequestSpec:
    if api == "chat":
        return RequestSpec(None, [{"role": "user", "content": text}], max_tokens, input_len)
    return RequestSpec(text, None, max_tokens, input_len)


class DatasetError(ValueError):
    """A JSONL dataset that cannot be used; the message names the line and the fix."""


def dataset_requests(path: str | Path, n: int, default_max_tokens: int, api: str = "completions",
                     seed: int = 0, shuffle: bool = False) -> list[RequestSpec]:
    """Rows of a JSONL file, each ``{"prompt": str}`` or ``{"messages": [...]}`` with an optional
    ``max_tokens`` (or ``output_len``). Rows are reused in order when ``n`` exceeds the file."""
    p = Path(path)
    rows: list[RequestSpec] = []
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"{p}: cannot read the dataset ({exc.strerror}) — check the path") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise DatasetError(f"{p}:{i}: not valid JSON — one JSON object per line") from None
        if not isinstance(row, dict):
            raise DatasetError(f"{p}:{i}: expected a JSON object with 'prompt' or 'messages'")
        mt = int(row.get("max_tokens") or row.get("output_len") or default_max_tokens)
        if isinstance(row.get("messages"), list):
            msgs = row["messages"]
            text = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
            prompt = text if api == "completions" else None
            rows.append(RequestSpec(prompt, msgs if api == "chat" else None, mt, len(text.split())))
        elif isinstance(row.get("prompt"), str):
            rows.append(_spec(row["prompt"], mt, len(row["prompt"].split()), api))
        else:
            raise DatasetError(f"{p}:{i}: needs a 'prompt' string or a 'messages' list")
    if not rows:
        raise DatasetError(f"{p}: the dataset has no rows — add JSON lines with 'prompt'")
    if shuffle:
        random.Random(seed).shuffle(rows)
    return [rows[i % len(rows)] for i in range(n)]
