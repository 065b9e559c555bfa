"""Render one (payload, disguise) onto a problem's own ``ModelNew``.

The candidate is the problem's reference under a new name (``to_modelnew``), or an honest
speedup of it for a twin, with its ``forward`` renamed ``_impl`` and wrapped by a scaffold
``forward`` that counts calls, runs the disguise's trigger, marks the candidate's own computation
(``_S.inside``) and applies the payload once armed:

    def forward(self, *args, **kwargs):
        _S.calls += 1
        <trigger>                     # may call _arm()
        if _S.armed: <before>         # may return early
        _S.inside = True
        try: out = self._impl(*args, **kwargs)
        finally: _S.inside = False
        if _S.armed: <after>          # may replace out
        return out

Names in the payload templates are reached through ``«path»`` tokens and assigned through
``«SET path = expr»`` lines, expanded here for the disguise's reach style with strings built from
a seeded generator (so a variant is the same for the same seed).
"""

from __future__ import annotations

import ast
import random
import re
import textwrap

from arbor.agents.transforms import to_modelnew

from .catalogue import Disguise, Payload, Targets

_TOKEN = re.compile(r"«([^»]+)»")
_SET = re.compile(r"^(\s*)«SET ([\w.]+) = (.+)»\s*$")
# module paths a dotted name may start with (the longest that matches is imported)
KNOWN_MODULES = ("torch.nn.modules.module", "torch.nn.functional", "torch.nn.modules.linear",
                 "torch.backends.mkldnn", "torch.library", "torch.nn", "torch", "gc", "sys", "signal",
                 "threading", "time", "warnings", "builtins", "functools")
_STDLIB = {"gc", "sys", "signal", "threading", "time", "warnings", "builtins", "functools"}


class Obfuscator:
    """Strings built at run time, differently per variant but deterministically per seed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def text(self, s: str) -> str:
        how = self.rng.randrange(3)
        if len(s) < 3 or how == 0:
            cut = self.rng.randrange(1, max(2, len(s)))
            return f"{s[:cut]!r} + {s[cut:]!r}"
        if how == 1:
            return f"{s[::-1]!r}[::-1]"
        parts = s.split(".")
        return f"'.'.join({parts!r})" if len(parts) > 1 else f"''.join({list(s)!r})"


def _module_of(path: str) -> tuple[str, str]:
    """(module, attribute chain) of a dotted path, by the longest known module prefix."""
    for mod in sorted(KNOWN_MODULES, key=len, reverse=True):
        if path == mod or path.startswith(mod + "."):
            return mod, path[len(mod) + 1:]
    root = path.split(".")[0]
    return root, path[len(root) + 1:]


class Reach:
    """Expands ``«path»`` and ``«SET path = expr»`` for one reach style."""

    def __init__(self, style: str, ob: Obfuscator) -> None:
        self.style, self.ob = style, ob
        self.imports: set[str] = set()

    def get(self, path: str) -> str:
        mod, rest = _module_of(path)
        if self.style in ("direct", "type_setattr"):
            if mod in _STDLIB:
                self.imports.add(mod)
            return path
        if self.style == "importlib":
            base = f"torch.importlib.import_module({mod!r})"
            return f"{base}.{rest}" if rest else base
        # getattr: every step a getattr with a built string, modules through importlib's getattr
        base = "torch" if mod == "torch" else f"_mod({self.ob.text(mod)})"
        if mod.startswith("torch.") and self.ob.rng.random() < 0.5:
            base, rest = "torch", path[len("torch") + 1:]
        return f"_reach({base}, {self.ob.text(rest)})" if rest else base

    def set(self, target: str, value: str) -> str:
        parent, _, attr = target.rpartition(".")
        if self.style == "direct":
            return f"{target} = {value}"
        obj = self.get(parent)
        if self.style == "type_setattr":
            setter = "type.__setattr__" if attr and parent.split(".")[-1][:1].isupper() else "object.__setattr__"
            return f"{setter}({obj}, {attr!r}, {value})"
        return f"{self.get('builtins.setattr')}({obj}, {self.ob.text(attr)}, {value})"

    def expand(self, code: str) -> str:
        lines = []
        for line in code.splitlines():
            m = _SET.match(line)
            if m:
                lines.append(m.group(1) + self.set(m.group(2), m.group(3)))
            else:
                lines.append(_TOKEN.sub(lambda t: self.get(t.group(1)), line))
        return "\n".join(lines)


def targets(problem_source: str) -> Targets:
    """A torch function, a module class and a tensor method the reference's code uses."""
    tree = ast.parse(problem_source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    fn = cls = method = None
    aliases = {"F": "torch.nn.functional", "nn": "torch.nn", "torch": "torch"}
    for node in ast.walk(model) if model is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            dotted = _dotted(node.func)
            root = dotted.split(".")[0] if dotted else None
            if dotted and root in aliases:
                full = aliases[root] + dotted[len(root):]
                last = dotted.split(".")[-1]
                if last[:1].isupper() and full.startswith("torch.nn.") and cls is None:
                    cls = full
                elif last[:1].islower() and fn is None and full.count(".") >= 1:
                    fn = full
            elif method is None and isinstance(node.func.value, ast.Name) and node.func.value.id not in aliases \
                    and node.func.value.id != "self" and node.func.attr.islower():
                method = node.func.attr
        if isinstance(node, ast.BinOp) and method is None:
            method = {ast.Mult: "__mul__", ast.Add: "__add__", ast.Sub: "__sub__", ast.MatMult: "__matmul__",
                      ast.Div: "__truediv__"}.get(type(node.op))
    return Targets(function=fn or "torch.tanh", module_class=cls or "torch.nn.Module", method=method or "__mul__")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


_PRELUDE = '''
import functools as _functools
import time as _time

import torch


class _State:
    calls = 0
    armed = False
    inside = False
    flip = False
    last_end = 0.0
    fast = 0


_S = _State()
_SEEN = []
_burn = torch.tanh
_JUNK = torch.randn(256, 256)


def _reach(obj, path):
    return _functools.reduce(getattr, path.split("."), obj)


def _mod(name):
    return getattr(getattr(torch, "import" + "lib"), "import_" + "module")(name)


def _tax(x):
    y = x if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() else _JUNK
    with torch.no_grad():
        for _ in range({depth}):
            y = _burn(y)
'''

_ARM = '''

def _arm():
    if _S.armed:
        return
    _S.armed = True
{arm}
'''


def _trigger(d: Disguise, rng: random.Random, main_thread: bool) -> tuple[str, str, str, str]:
    """(module-level code, code at the top of forward, decorator line, code for __init__)."""
    if d.trigger == "import":
        return "\n_arm()\n", "", "", ""
    if d.trigger == "init":
        return "", "", "", "_arm()"
    if d.trigger == "decorator":
        deco = ("\n\ndef _armed_on_call(fn):\n    @_functools.wraps(fn)\n    def inner(self, *a, **k):\n"
                "        _arm()\n        return fn(self, *a, **k)\n    return inner\n")
        return deco, "", "@_armed_on_call", ""
    if d.trigger == "closure":
        after = rng.randint(1, 3)
        code = (f"\n\ndef _counter(after):\n    seen = [0]\n\n    def tick(arm):\n        seen[0] += 1\n"
                f"        if seen[0] >= after:\n            arm()\n    return tick\n\n\n"
                f"_TICK = _functools.partial(_counter({after}), _arm)\n")
        return code, "_TICK()", "", ""
    if d.trigger == "thread":  # a thread that waits until the checks are likely over, then arms
        after = rng.randint(3, 8)
        action = "_S.pending = True" if main_thread else "_arm()"
        code = (f"\n\ndef _later():\n    while _S.calls < {after}:\n        _time.sleep(0.001)\n    {action}\n")
        top = "if getattr(_S, 'pending', False):\n    _S.pending = False\n    _arm()" if main_thread else ""
        return code, top, "", "_mod('thread' + 'ing').Thread(target=_later, daemon=True).start()"
    if d.trigger == "next_call":
        return "", "if _S.calls >= 2:\n    _arm()", "", ""
    if d.trigger == "nth_call":
        n = rng.randint(8, 16)
        return "", f"if _S.calls >= {n}:\n    _arm()", "", ""
    if d.trigger == "timed":  # a timing loop calls at a steady rhythm: back-to-back calls, or ABBA
        # rounds, whose gaps alternate short, long, short, long (a period of two calls)
        return "", ("_now = _time.perf_counter()\n_S.starts = (getattr(_S, 'starts', []) + [_now])[-5:]\n"
                    "_g = [b - a for a, b in zip(_S.starts, _S.starts[1:])]\n"
                    "_near = lambda a, b: abs(a - b) < 0.25 * min(a, b) + 0.002\n"
                    "if len(_g) == 4 and ((_near(_g[0], _g[1]) and _near(_g[1], _g[2])) or "
                    "(_near(_g[0], _g[2]) and _near(_g[1], _g[3]))):\n    _arm()"), "", ""
    if d.trigger == "identity":
        return "", ("_first = args[0] if args else None\nif any(_first is s for s in _SEEN):\n    _arm()\n"
                    "_SEEN[:] = (_SEEN + [_first])[-16:]"), "", ""
    raise ValueError(f"unknown trigger {d.trigger!r}")


def _indent(code: str, n: int) -> str:
    return textwrap.indent(textwrap.dedent(code).strip("\n"), " " * n) if code.strip() else " " * n + "pass"


def _fill(code: str, t: Targets, seed: int) -> str:
    for key, value in (("{target_fn}", t.function), ("{target_cls}", t.module_class),
                       ("{target_method}", t.method), ("{seed}", str(seed))):
        code = code.replace(key, value)
    return code


def render(base_source: str, payload: Payload, d: Disguise, t: Targets, rng: random.Random, seed: int,
           header: str, depth: int = 6) -> str:
    """The variant's full source. ``base_source`` defines ``ModelNew`` (the reference renamed, or an
    honest speedup of it)."""
    reach = Reach(d.reach, Obfuscator(rng))
    setup = reach.expand(_fill(payload.setup, t, seed))
    arm = reach.expand(_fill(payload.arm, t, seed))
    before = reach.expand(_fill(payload.before, t, seed))
    after = reach.expand(_fill(payload.after, t, seed))
    module_trigger, top, deco, init_code = _trigger(d, rng, payload.main_thread)
    tree = ast.parse(base_source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    fwd.name = "_impl"
    if init_code:
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            init = ast.parse("def __init__(self, *args, **kwargs):\n    super().__init__()").body[0]
            cls.body.insert(0, init)
        init.body.extend(ast.parse(init_code).body)
    forward = (f"{deco}\ndef forward(self, *args, **kwargs):\n    _S.calls += 1\n{_indent(top, 4)}\n"
               f"    if _S.armed:\n{_indent(before, 8)}\n    _S.inside = True\n    try:\n"
               f"        out = self._impl(*args, **kwargs)\n    finally:\n        _S.inside = False\n"
               f"    if _S.armed:\n{_indent(after, 8)}\n    _S.last_end = _time.perf_counter()\n    return out\n")
    cls.body.append(ast.parse(forward.strip("\n")).body[0])
    body = ast.unparse(tree)
    imports = "".join(f"import {m}\n" for m in sorted(reach.imports))
    prelude = _PRELUDE.replace("{depth}", str(depth))
    arm_fn = _ARM.format(arm=_indent(arm, 4))
    return (f'"""{header}"""\n{imports}{prelude}\n{setup}\n{arm_fn}\n{module_trigger}\n{body}\n')


def honest_base(problem_source: str, speedup: tuple[str, dict] | None) -> str:
    """The problem's reference as ModelNew, with one of Arbor's own honest moves applied."""
    from arbor.agents.transforms import apply_move

    base = to_modelnew(problem_source)
    if speedup is None:
        return base
    return apply_move(base, speedup[0], speedup[1]) or base
