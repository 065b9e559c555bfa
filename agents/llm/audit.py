"""Audit helpers: compressed prompt/reply payloads and secret redaction.

Every prompt and reply is stored in the ``events`` table for audit and replay. Payloads are
JSON, so large texts are zlib-compressed and base64-encoded (``*_z`` fields); replies are also
capped so a 5 MB reply cannot bloat the store. Everything that could carry a credential passes
through ``Redactor`` first: the key itself never reaches the store, the logs or an event.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

MAX_STORED_CHARS = 256_000
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|Bearer\s+[A-Za-z0-9_\-.=*]{8,})")


def pack(obj: object) -> str:
    """JSON → zlib → base64 text (what goes into an event payload)."""
    raw = json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def unpack(text: str) -> object:
    return json.loads(zlib.decompress(base64.b64decode(text)).decode("utf-8"))


def cap(text: str, limit: int = MAX_STORED_CHARS) -> tuple[str, bool]:
    """Keep the head and tail of an over-long text; True when something was dropped."""
    if len(text) <= limit:
        return text, False
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} chars dropped ...]\n{text[-half:]}", True


def safe_url(url: str | None) -> str | None:
    """An endpoint URL without user info, query or fragment (where credentials hide)."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class Redactor:
    """Replaces known secret values (and anything shaped like an API key) with ``***``."""

    secrets: list[str] = field(default_factory=list)

    def add(self, secret: str | None) -> None:
        if secret and len(secret) >= 4 and secret not in self.secrets:
            self.secrets.append(secret)

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return _KEY_LIKE.sub(lambda m: m.group(0)[:3] + "***", text)

    def scrub(self, obj: object) -> object:
        """Redact every string inside a JSON-like object."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, dict):
            return {k: self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.scrub(v) for v in obj]
        return obj
