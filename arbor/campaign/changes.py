"""Change detection: a campaign remembers what its measurements depended on, so a re-run after
an edit never resumes silently on stale results.

Three fingerprints are recorded (as a ``fingerprints`` event) when a campaign starts: the spec's
measurement-relevant sections (target, objective, measurement, critic, sandbox — not the budget,
the agents, the store or the name, which change what is searched next but not what a stored
measurement means), the problem file (or landscape) and the skills. A later run compares them
and, when one differs, stops with one line naming what changed and the two ways on:
``--restart`` (the old campaign is archived under ``NAME@archived-N`` and a new one starts under
the same name) or ``--fork NEW`` (a new campaign beside the old one).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from arbor.search_tree.store import Store
from arbor.spec import CampaignSpec

MEASURED_SECTIONS = ("target", "objective", "measurement", "critic", "sandbox")
EVENT = "fingerprints"


class CampaignChanged(RuntimeError):
    """The campaign's spec, problem or skills changed since its measurements were taken."""


def _sha(data) -> str:
    text = data if isinstance(data, str) else json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _problem_file(spec: CampaignSpec) -> Path | None:
    for getter in ("problem_path", "landscape_path"):
        try:
            return getattr(spec, getter)()
        except AttributeError:
            continue
    return None


def fingerprints(spec: CampaignSpec) -> dict[str, str]:
    """spec / problem / skills digests (16 hex digits each)."""

    dumped = spec.model_dump(mode="json")
    measured = {k: dumped.get(k) for k in MEASURED_SECTIONS}
    path = _problem_file(spec)
    problem = path.read_text(encoding="utf-8", errors="replace") if path and path.is_file() else ""
    skills = [s.model_dump(mode="json") for s in spec.load_skills()]
    return {"spec": _sha(measured), "problem": _sha(problem), "skills": _sha(skills)}


def recorded(store: Store, campaign_id: int) -> dict | None:
    evs = store.events(campaign_id, limit=1_000_000, kinds=[EVENT])
    return evs[-1].payload if evs else None


def changed_parts(old: dict, new: dict[str, str]) -> list[str]:
    return [k for k in ("spec", "problem", "skills") if k in old and old.get(k) != new[k]]


def _describe(old: dict, new: dict, parts: list[str], spec: CampaignSpec) -> str:
    words = []
    for part in parts:
        if part == "spec":
            before = old.get("sections") or {}
            now = {k: _sha(spec.model_dump(mode="json").get(k)) for k in MEASURED_SECTIONS}
            which = [k for k in MEASURED_SECTIONS if before and before.get(k) != now[k]]
            words.append(f"spec ({', '.join(which)})" if which else "spec")
        elif part == "problem":
            path = _problem_file(spec)
            words.append(f"problem file ({path.name})" if path else "problem")
        else:
            words.append("skills")
    return " and ".join(words)


def payload(spec: CampaignSpec) -> dict:
    fp = fingerprints(spec)
    dumped = spec.model_dump(mode="json")
    return {**fp, "sections": {k: _sha(dumped.get(k)) for k in MEASURED_SECTIONS}}


def next_archive_name(store: Store, name: str) -> str:
    taken = {c.name for c in store.list_campaigns()}
    n = 1
    while f"{name}@archived-{n}" in taken:
        n += 1
    return f"{name}@archived-{n}"


def check(store: Store, spec: CampaignSpec, restart: bool = False, fork: str | None = None,
          report=lambda kind, data: None) -> CampaignSpec:
    """Decide which campaign this run continues; returns the spec to run (renamed for a fork).

    Raises CampaignChanged (one line, the choices) when the stored campaign was measured under
    other fingerprints and neither ``restart`` nor ``fork`` was given."""
    if restart and fork:
        raise CampaignChanged("--restart and --fork are alternatives — pass one of them")
    now = payload(spec)
    if fork:
        target = store.get_campaign(fork)
        if target is not None:
            old = recorded(store, target.id)
            if old and changed_parts(old, now):
                raise CampaignChanged(f"campaign {fork!r} already exists and was measured under other settings "
                                      "— pick another --fork name")
        source = store.get_campaign(spec.name)
        spec = spec.model_copy(update={"name": fork})
        if target is None and source is not None:
            from .fork import copy_measured, reusable

            why = reusable(recorded(store, source.id), now)
            reused = 0
            if why is None:
                from arbor.targets import make_adapter

                camp = store.get_or_create_campaign(fork, make_adapter(spec).kind, spec.model_dump(mode="json"))
                reused = copy_measured(store, source.id, camp.id, owner=f"fork-{source.id}")
                store.append_event(camp.id, "forked", {"from": source.name, "reused": reused}, agent="loop")
            note = (f"{reused} measured node(s) reused, to be judged again" if why is None
                    else f"starting fresh: {why}, so no measurement is reused")
            report("forked", {"from": source.name, "reused": reused, "note": note})
        return spec
    camp = store.get_campaign(spec.name)
    if camp is None:
        return spec
    old = recorded(store, camp.id)
    parts = changed_parts(old, now) if old else []
    if not parts and not restart:
        return spec
    if restart:
        archived = next_archive_name(store, spec.name)
        store.update_campaign(camp.id, name=archived)
        report("restarted", {"archived_as": archived})
        return spec
    raise CampaignChanged(
        f"campaign {spec.name!r} changed since it was measured: {_describe(old, now, parts, spec)} — "
        f"run again with --restart (archive the old nodes as {next_archive_name(store, spec.name)!r} and "
        f"start again) or --fork NEW (a new campaign beside it)")


def record(store: Store, spec: CampaignSpec, campaign_id: int) -> None:
    """Remember the fingerprints the campaign's measurements are taken under (once per change)."""
    now = payload(spec)
    old = recorded(store, campaign_id)
    if old is None or changed_parts(old, now) or old.get("sections") != now["sections"]:
        store.append_event(campaign_id, EVENT, now, agent="loop")
