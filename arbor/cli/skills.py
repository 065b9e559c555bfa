"""``arbor skills list|show``: the skills a campaign's agents would load.

Built-in skills plus any user directories (``--dir``, repeatable, or a campaign's
``skills.extra_dirs`` via ``--spec``), validated exactly as a campaign loads them, so a broken
skill file shows up here with the same one-line error it would stop a campaign with.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from .common import fail, out, print_json, user_errors

skills_app = typer.Typer(add_completion=False, no_args_is_help=True,
                         help="List and show the hard and soft skills agents load.")

DirOpt = typer.Option(None, "--dir", "-d", help="extra skills directory (repeatable)")
SpecOpt = typer.Option(None, "--spec", "-s", help="campaign YAML whose skills.extra_dirs to include")
JsonOpt = typer.Option(False, "--json", help="machine-readable output")


def _load(dirs: Optional[List[Path]], spec: Optional[Path]):
    from arbor.agents.skills import load_skills
    from arbor.spec import load_spec

    extra = [Path(d) for d in (dirs or [])]
    if spec is not None:
        extra = load_spec(spec).skill_dirs() + extra
    return load_skills(extra)


def _row(s) -> dict:
    return {"name": s.name, "kind": s.kind, "domain": s.domain, "applies_to": s.applies_to,
            "summary": s.summary, "moves": [m.id for m in s.moves], "path": s.path}


@skills_app.command("list")
def list_skills(kind: Optional[str] = typer.Option(None, "--kind", help="hard or soft"),
                domain: Optional[str] = typer.Option(None, "--domain", help="kernel, serving or any"),
                dirs: Optional[List[Path]] = DirOpt, spec: Optional[Path] = SpecOpt,
                json_out: bool = JsonOpt) -> None:
    """Every skill with its kind, domain, devices, move count and summary."""
    try:
        if kind not in (None, "hard", "soft"):
            raise typer.BadParameter("use --kind hard or --kind soft")
        skills = [s for s in _load(dirs, spec)
                  if (kind is None or s.kind == kind) and (domain is None or s.domain in (domain, "any"))]
    except typer.BadParameter as exc:
        fail(exc)
    except user_errors() as exc:
        fail(exc)
    if json_out:
        print_json([_row(s) for s in skills])
        return
    table = Table(title=f"{len(skills)} skills", show_lines=False)
    for col in ("name", "kind", "domain", "devices", "moves"):
        table.add_column(col, no_wrap=True)
    table.add_column("summary", overflow="fold")
    for s in skills:
        devices = ",".join(s.devices) if s.devices else "any"
        table.add_row(s.name, s.kind, s.domain, devices, str(len(s.moves)), s.summary)
    out.print(table)


@skills_app.command("show")
def show_skill(name: str = typer.Argument(..., help="skill name (see `arbor skills list`)"),
               dirs: Optional[List[Path]] = DirOpt, spec: Optional[Path] = SpecOpt,
               json_out: bool = JsonOpt) -> None:
    """One skill: front matter, moves and the prompt material LLM agents see."""
    try:
        skills = _load(dirs, spec)
        skill = next((s for s in skills if s.name == name), None)
        if skill is None:
            from difflib import get_close_matches

            from arbor.agents.skills import SkillError

            near = get_close_matches(name, [s.name for s in skills], n=3)
            hint = f"did you mean {', '.join(near)}?" if near else "run `arbor skills list` to see them"
            raise SkillError(name, "name", "no such skill", hint)
    except user_errors() as exc:
        fail(exc)
    if json_out:
        print_json({**_row(skill), "moves": [m.model_dump() for m in skill.moves], "body": skill.body})
        return
    out.rule(f"{skill.name} ({skill.kind}, {skill.domain})")
    out.print(f"summary  {skill.summary}")
    out.print(f"devices  {', '.join(skill.devices) if skill.devices else 'any'}")
    out.print(f"file     {skill.path}")
    for m in skill.moves:
        params = f" {m.params}" if m.params else ""
        when = f", when {m.when}" if m.when else ""
        out.print(f"move     {m.id}: {m.transform}{params} (prior {m.prior}{when})"
                  + (f" — {m.description}" if m.description else ""))
    out.print()
    out.print(skill.body, markup=False)
