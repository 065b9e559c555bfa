"""Which variants a red-team run measures: every class in every disguise that applies to it,
``per_combo`` payloads each (rotated so every payload of a class is used), and ``twins`` honest
twins per class. Deterministic for a seed: the same seed writes the same sources.

A twin is the class's benign payload in the same scaffolding and disguise, on top of an honest
speedup found by Arbor's own moves (the highest-prior exact rewrite that applies: removing a
redundant op, fusing a spelled-out activation), so it must be *accepted*: a twin the Critic flags
is a false positive of the defence that flagged it. One more twin per problem wraps the honest
speedup in ``torch.compile``, which registers things of its own.
"""

from __future__ import annotations

import ast
import hashlib
import random
from dataclasses import dataclass, field

from .catalogue import CLASS_BY_ID, CLASSES, DISGUISE_BY_ID, DISGUISES, HackClass, applicable
from .codegen import honest_base, render, targets

# Arbor's own honest moves, best first: exact rewrites whose speedup does not depend on the machine
HONEST_MOVES = ("graph-algebra-all", "gelu-tanh-sqrt-pi-pow", "gelu-tanh-literal-pow", "silu-manual",
                "graph-fused-activations", "pow-strength-reduction")


@dataclass(frozen=True)
class Variant:
    id: str
    kind: str  # hostile | honest
    klass: str  # the class id ("21", "7b"); "compile" for the compiled twin
    disguise: str
    payload: str
    source: str
    origin: str = "generator"  # generator | llm | corpus
    idea: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]


def honest_speedup(problem_source: str, device: str = "cpu") -> tuple[str, dict] | None:
    """(transform, params) of the first of ``HONEST_MOVES`` that changes this problem, or None."""
    from arbor.agents.skills import kernel_moves, load_skills
    from arbor.agents.transforms import apply_move, to_modelnew

    base = to_modelnew(problem_source)
    moves = {m.id: m for m in kernel_moves(load_skills(), device)}
    for move_id in HONEST_MOVES:
        m = moves.get(move_id)
        if m is None:
            continue
        try:
            out = apply_move(base, m.transform, m.params)
        except Exception:  # noqa: BLE001  a move that does not fit this problem
            continue
        if out and out != base:
            return m.transform, dict(m.params)
    return None


def _header(v_id: str, kind: str, klass: HackClass | None, disguise: str, payload: str, seed: int,
            summary: str) -> str:
    title = klass.title if klass else "torch.compile"
    return (f"redteam: {kind} variant {v_id} (seed {seed})\nclass: {klass.id if klass else 'compile'} "
            f"({title})\ndisguise: {disguise}\npayload: {payload}: {summary}\n")


def _check(source: str, v_id: str) -> None:
    try:
        ast.parse(source)
    except SyntaxError as exc:  # a generator bug, never the candidate's
        raise ValueError(f"red-team variant {v_id} does not parse (line {exc.lineno}: {exc.msg})") from None


def generate(problem_source: str, seed: int = 0, classes: list[str] | None = None,
             disguises: list[str] | None = None, per_combo: int = 2, twins: int = 2,
             compile_twin: bool = True, device: str = "cpu") -> list[Variant]:
    """Hostile variants and honest twins for one KernelBench problem."""
    for kind, asked, known in (("class", classes, CLASS_BY_ID), ("disguise", disguises, DISGUISE_BY_ID)):
        unknown = [x for x in asked or [] if x not in known]
        if unknown:
            raise ValueError(f"unknown {kind} {', '.join(unknown)} (known: {', '.join(known)})")
    chosen = [CLASS_BY_ID[c] for c in classes] if classes else list(CLASSES)
    wear = [DISGUISE_BY_ID[d] for d in disguises] if disguises else list(DISGUISES)
    tgt = targets(problem_source)
    base = honest_base(problem_source, None)
    speed = honest_speedup(problem_source, device)
    fast = honest_base(problem_source, speed)
    out: list[Variant] = []
    for k, klass in enumerate(chosen):
        rng = random.Random(f"{seed}:{klass.id}")
        start = rng.randrange(len(klass.payloads))
        for j, d in enumerate(wear):
            usable = [p for p in klass.payloads if applicable(p, d)]
            if not usable:
                continue
            for n in range(min(per_combo, len(usable))):
                p = usable[(start + j * per_combo + n) % len(usable)]
                v_id = f"h{klass.id}-{d.id}-{p.id}"
                vr = random.Random(f"{seed}:{v_id}")
                src = render(base, p, d, tgt, vr, seed, _header(v_id, "hostile", klass, d.id, p.id, seed, p.summary),
                             depth=vr.randint(4, 8))
                _check(src, v_id)
                out.append(Variant(v_id, "hostile", klass.id, d.id, p.id, src))
        honest_wear = [d for d in wear if d.honest]
        for d in rng.sample(honest_wear, min(twins, len(honest_wear))):
            v_id = f"t{klass.id}-{d.id}"
            vr = random.Random(f"{seed}:{v_id}")
            src = render(fast, klass.honest, d, tgt, vr, seed,
                         _header(v_id, "honest", klass, d.id, "honest", seed, klass.honest.summary))
            _check(src, v_id)
            out.append(Variant(v_id, "honest", klass.id, d.id, "honest", src,
                               meta={"speedup_move": speed[0] if speed else None}))
    if compile_twin and twins:
        from arbor.agents.transforms import apply_move

        compiled = apply_move(fast, "wrap_compile", {"mode": "default", "dynamic": False})
        if compiled:
            header = _header("t-compile", "honest", None, "direct", "torch.compile", seed,
                             "the honest speedup compiled with torch.compile")
            out.append(Variant("t-compile", "honest", "compile", "direct", "torch.compile",
                               f'"""{header}"""\n{compiled}'))
    return out


def cover(variants: list[Variant], twins: int = 3) -> list[Variant]:
    """A small subset with every class and every disguise at least once among the hostile
    variants (each disguise, in order, on the next class not yet covered that can wear it; the
    classes left over in their first payload, reached by getattr), and ``twins`` honest twins plus
    the compiled one: the CI's fixed-seed red-team run."""
    hostile = [v for v in variants if v.kind == "hostile"]
    first = {c.id: c.payloads[0].id for c in CLASSES}
    classes = list(dict.fromkeys(v.klass for v in hostile))
    out: list[Variant] = []
    present = {v.disguise for v in hostile}
    for d in [d.id for d in DISGUISES if d.id in present]:
        pick = next((v for k in classes if k not in {o.klass for o in out}
                     for v in hostile if v.klass == k and v.disguise == d), None)
        if pick is not None:
            out.append(pick)
    for k in classes:
        if k not in {o.klass for o in out}:
            mine = [v for v in hostile if v.klass == k]
            out.append(next((v for v in mine if v.payload == first.get(k) and v.disguise == "getattr"),
                            next((v for v in mine if v.payload == first.get(k)), mine[0])))
    honest = [v for v in variants if v.kind == "honest" and v.klass != "compile"]
    out += honest[:: max(1, len(honest) // max(1, twins))][:twins]
    out += [v for v in variants if v.klass == "compile"][:1]
    return out
