"""Static guard: an AST pass over a candidate before it is ever executed.

Text regexes are trivially dodged (``getattr(__import__('subpro'+'cess'), ...)``), so this walks
the syntax tree and flags the *constructs* used by known reward hacks
(docs/integrity.md#reward-hacks): falling back to the reference, importing process/network/FFI
modules, patching timers, the checker or library functions, changing process-wide precision,
intercepting the reference's ops (dispatch modes, aten overrides), reading files, and the dynamic
execution and introspection that would hide any of the former. It is the first of two lines:
the harness re-checks the same classes at run time.

Precision switches follow the campaign's precision mode (docs/campaigns.md#precision): a switch
set to a value that lets an op compute below the mode's precision is flagged (TF32 or reduced-
precision reductions in fp32 mode); at or above it (TF32 in fp16 and bf16 modes) it is the
candidate's own choice, as is ``cudnn.benchmark`` in every mode: the harness keeps the reference
running under the switches it had before the candidate was imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_THREADS = "work on threads or processes outside the timed region"
FORBIDDEN_MODULES = {
    "subprocess": _THREADS, "multiprocessing": _THREADS, "threading": _THREADS,
    "_thread": _THREADS, "concurrent": _THREADS, "_posixsubprocess": _THREADS, "pty": _THREADS,
    "asyncio": _THREADS, "sched": _THREADS, "atexit": "work after the measurement ends",
    "socket": "network access", "urllib": "network access", "http": "network access",
    "requests": "network access", "ssl": "network access", "ftplib": "network access",
    "ctypes": "raw memory / FFI tricks", "cffi": "raw memory / FFI tricks", "mmap": "raw memory",
    "signal": "tampering with the harness's signals", "resource": "changing the sandbox's limits",
    "gc": "reaching the harness's objects through the garbage collector",
    "inspect": "reading the harness's frames", "traceback": "reading the harness's frames",
    "importlib": "dynamic imports that hide what runs", "builtins": "patching builtins",
    "pickle": "loading precomputed results", "marshal": "loading precomputed results",
    "shelve": "loading precomputed results", "dill": "loading precomputed results",
    "joblib": "loading precomputed results", "shutil": "file-system access",
    "tempfile": "file-system access", "glob": "file-system access",
    # the reference and the harness live in the same process under these names
    "arbor_problem": "reaching the reference", "problem": "reaching the reference",
    "arbor_candidate": "reaching the harness", "kernel_harness": "reaching the harness",
    "arbor": "reaching the harness", "__main__": "reaching the harness",
}
HARNESS_PREFIXES = ("arbor_harness_",)
FORBIDDEN_SUBMODULES = {"torch.multiprocessing": _THREADS, "torch.distributed": _THREADS}
FORBIDDEN_CALLS = {
    "eval": "dynamic code execution", "exec": "dynamic code execution",
    "compile": "dynamic code execution", "__import__": "dynamic imports that hide what runs",
    "open": "reading or writing files (results must be computed, not loaded)",
    "globals": "reaching into module state", "vars": "reaching into module state",
    "setattr": "patching objects at run time", "delattr": "patching objects at run time",
    "breakpoint": "debugger hooks",
}
_PRECISION = "lowers precision process-wide (the reference would run at it too)"
FORBIDDEN_ATTR_CALLS = {
    **{("os", n): "spawns or signals processes" for n in (
        "system", "popen", "fork", "forkpty", "kill", "killpg", "_exit", "execv", "execve",
        "execl", "execle", "execlp", "execvp", "execvpe", "spawnv", "spawnve", "spawnl",
        "spawnle", "posix_spawn", "posix_spawnp", "register_at_fork")},
    **{("os", n): "file-system access" for n in ("remove", "unlink", "open", "read", "write",
                                                   "listdir", "scandir", "walk", "chdir")},
    **{("os", n): "changes how the process is scheduled" for n in (
        "sched_setaffinity", "nice", "setpriority", "sched_setscheduler")},
    **{("sys", n): "installs interpreter hooks or reads frames" for n in (
        "settrace", "setprofile", "setswitchinterval", "_getframe", "setrecursionlimit",
        "addaudithook", "exit")},
    ("torch", "load"): "loading precomputed results", ("np", "load"): "loading precomputed results",
    ("numpy", "load"): "loading precomputed results", ("torch", "from_file"): "reading files",
    ("np", "fromfile"): "reading files", ("numpy", "fromfile"): "reading files",
    ("io", "open"): "reading or writing files",
    ("torch", "set_default_dtype"): _PRECISION, ("torch", "set_default_tensor_type"): _PRECISION,
}
# Precision switches, what each value lets an op compute in, and the mantissa bits of that; a mode's
# floor is its own dtype's bits (the harness's process_state.PRECISION holds the same rules).
MANTISSA_BITS = {"fp64": 52, "fp32": 23, "tf32": 10, "fp16": 10, "bf16": 7}
PRECISION_ATTRS = {  # attribute -> (value -> precision permitted); an unknown value: the lowest
    "allow_tf32": lambda v: "tf32" if v is not False else "fp32",
    "allow_fp16_reduced_precision_reduction": lambda v: "fp16" if v is not False else "fp32",
    "allow_fp16_accumulation": lambda v: "fp16" if v is not False else "fp32",
    "allow_bf16_reduced_precision_reduction": lambda v: "bf16" if v is not False else "fp32",
    "fp32_precision": lambda v: {"ieee": "fp32", "none": "fp32", "tf32": "tf32"}.get(v, "bf16"),
}
_MATMUL_PRECISION = {"highest": "fp32", "high": "tf32"}  # "medium" and anything unknown: bf16
# torch's C setters behind those attributes, called directly: (the attribute it sets, value argument)
_C_SETTERS = {
    "_set_cublas_allow_tf32": ("allow_tf32", 0), "_set_cudnn_allow_tf32": ("allow_tf32", 0),
    "_set_onednn_allow_tf32": ("allow_tf32", 0), "_set_fp32_precision_setter": ("fp32_precision", 2),
    "_set_cublas_allow_fp16_reduced_precision_reduction": ("allow_fp16_reduced_precision_reduction", 0),
    "_set_cpu_allow_fp16_reduced_precision_reduction": ("allow_fp16_reduced_precision_reduction", 0),
    "_set_cublas_allow_bf16_reduced_precision_reduction": ("allow_bf16_reduced_precision_reduction", 0),
    "_set_cublas_allow_fp16_accumulation": ("allow_fp16_accumulation", 0),
}
OWN_SWITCHES = ("cudnn.benchmark",)  # the candidate's own for its calls (process_state.OWN)
_UNKNOWN = object()
FILE_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes"}
INTERNALS = {"__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__bases__",
             "__mro__", "f_back", "f_globals", "f_locals", "f_code", "gi_frame", "tb_frame",
             "cr_frame", "__loader__"}
INTERCEPTORS = {"TorchDispatchMode", "TorchFunctionMode", "_push_mode", "_set_dispatch_mode",
                "_push_on_torch_dispatch_stack", "__torch_dispatch__", "__torch_function__"}
# assignments to attributes rooted at these names (and at any imported module) patch library code
PATCHED_ROOTS = {"torch", "time", "np", "numpy", "math", "os", "sys", "F", "nn", "functools",
                 "operator", "threading", "builtins"}


@dataclass(frozen=True)
class GuardFinding:
    code: str  # hack_suspected | compile_error
    line: int
    reason: str


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _attr_pair(node: ast.AST) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _dotted(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001
        return "?"


def _module_check(name: str, allowed: frozenset[str]) -> str | None:
    top = name.split(".")[0]
    if top in allowed:
        return None
    if top in FORBIDDEN_MODULES:
        return FORBIDDEN_MODULES[top]
    for sub, why in FORBIDDEN_SUBMODULES.items():
        if (name == sub or name.startswith(sub + ".")) and sub not in allowed:
            return why
    if top.startswith(HARNESS_PREFIXES):
        return "reaching the harness"
    return None


def _literal(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else _UNKNOWN


def _is_switch_store(target: ast.AST) -> bool:
    """A store to a precision switch or an own switch: judged by the precision rules, not as patching."""
    if not isinstance(target, ast.Attribute):
        return False
    return target.attr in PRECISION_ATTRS or _dotted(target).endswith(OWN_SWITCHES)


class _Visitor(ast.NodeVisitor):
    def __init__(self, allowed: frozenset[str], precision: str = "fp32") -> None:
        self.allowed = allowed
        self.floor = MANTISSA_BITS.get(precision, MANTISSA_BITS["fp32"])
        self.precision = precision
        self.judged: set[int] = set()  # switch stores already judged by their assignment
        self.findings: list[GuardFinding] = []
        self.modules: set[str] = set(PATCHED_ROOTS)

    def flag(self, node: ast.AST, reason: str) -> None:
        self.findings.append(GuardFinding("hack_suspected", getattr(node, "lineno", 0), reason))

    def precision_switch(self, node: ast.AST, what: str, permits: str) -> None:
        """Flag ``what`` when the precision it permits is below the campaign's precision mode."""
        if MANTISSA_BITS[permits] < self.floor:
            self.flag(node, f"sets {what}: lowers precision to {permits}, below the campaign's "
                      f"{self.precision} precision mode")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            why = _module_check(a.name, self.allowed)
            if why:
                self.flag(node, f"imports {a.name}: {why}")
            self.modules.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        name = node.module or ""
        why = _module_check(name, self.allowed) if node.level == 0 else "relative import"
        if why:
            self.flag(node, f"imports {name or '.'}: {why}")
        for a in node.names:
            if a.name in INTERCEPTORS:
                self.flag(node, f"imports {a.name}: intercepts the reference's operations too")
            if a.name == "Model":
                self.flag(node, "imports the reference Model (falls back to the reference)")

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        if isinstance(fn, ast.Name):
            if fn.id in FORBIDDEN_CALLS:
                self.flag(node, f"calls {fn.id}(): {FORBIDDEN_CALLS[fn.id]}")
            elif fn.id == "Model":
                self.flag(node, "instantiates the reference Model (falls back to the reference)")
        pair = _attr_pair(fn)
        if pair == ("torch", "set_float32_matmul_precision"):
            value = _literal(node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "precision"), None))
            shown = repr(value) if value is not _UNKNOWN else "..."
            self.precision_switch(node, f"torch.set_float32_matmul_precision({shown})",
                                  _MATMUL_PRECISION.get(value, "bf16") if isinstance(value, str) else "bf16")
        if isinstance(fn, ast.Attribute) and fn.attr in _C_SETTERS:
            attr, index = _C_SETTERS[fn.attr]
            value = _literal(node.args[index]) if len(node.args) > index else _UNKNOWN
            self.precision_switch(node, f"{_dotted(fn)}(...)", PRECISION_ATTRS[attr](value))
        elif isinstance(fn, ast.Attribute) and fn.attr == "_set_float32_matmul_precision":
            value = _literal(node.args[0]) if node.args else _UNKNOWN
            self.precision_switch(node, f"{_dotted(fn)}(...)", _MATMUL_PRECISION.get(value, "bf16")
                                  if isinstance(value, str) else "bf16")
        for kw in node.keywords:  # torch.backends.cudnn.flags(allow_tf32=...) and friends
            if kw.arg in PRECISION_ATTRS:
                self.precision_switch(node, f"{kw.arg}= in {_dotted(fn)}()",
                                      PRECISION_ATTRS[kw.arg](_literal(kw.value)))
        if pair in FORBIDDEN_ATTR_CALLS:
            self.flag(node, f"calls {pair[0]}.{pair[1]}(): {FORBIDDEN_ATTR_CALLS[pair]}")
        if isinstance(fn, ast.Attribute) and fn.attr in FILE_METHODS:
            self.flag(node, f"calls .{fn.attr}(): reading or writing files")
        name = _dotted(fn)
        if "library" in name.split(".") or name.endswith(("Library", "register_kernel")):
            consts = [a.value for a in ast.walk(node) if isinstance(a, ast.Constant)
                      and isinstance(a.value, str)]
            if any(c == "aten" or c.startswith(("aten::", "aten.")) for c in consts):
                self.flag(node, f"{name}(...) overrides an aten operator: the reference would run it too")
        self.generic_visit(node)

    def _assign(self, node: ast.AST, targets: list) -> None:
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    if isinstance(sub.ctx, ast.Store) and _is_switch_store(sub):
                        whole = sub is t and not isinstance(node, ast.AugAssign)  # `a.x = v`, not `a.x += v`
                        value = getattr(node, "value", None) if whole else None
                        self._switch_store(node, sub, _literal(value))
                        continue
                    root = _root_name(sub)
                    if root in self.modules and root != "self":
                        self.flag(node, f"assigns to {_dotted(sub)}: monkey-patching library or timer code")
                        return

    def _switch_store(self, node: ast.AST, target: ast.Attribute, value: object = _UNKNOWN) -> None:
        self.judged.add(id(target))
        if target.attr not in PRECISION_ATTRS:
            return  # cudnn.benchmark: the candidate's own (the reference runs without it)
        self.precision_switch(node, f"{_dotted(target)} = {value if value is not _UNKNOWN else '...'!r}",
                              PRECISION_ATTRS[target.attr](value))

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assign(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assign(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._assign(node, node.targets)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.flag(node, f"touches {node.id}")
        elif node.id in INTERCEPTORS:
            self.flag(node, f"uses {node.id}: intercepts the reference's operations too")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTERNALS:
            self.flag(node, f"reaches into interpreter internals ({node.attr})")
        elif node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            self.flag(node, "reads sys.modules: reaching the reference or the harness")
        elif node.attr == "__dict__" and _root_name(node) != "self":
            self.flag(node, f"reaches into {_dotted(node.value)}.__dict__ (monkey-patching)")
        elif node.attr in INTERCEPTORS:
            self.flag(node, f"uses {node.attr}: intercepts the reference's operations too")
        elif node.attr in PRECISION_ATTRS and isinstance(node.ctx, ast.Store) and id(node) not in self.judged:
            self._switch_store(node, node)  # a for/with target: the value cannot be read
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in INTERCEPTORS:
            self.flag(node, f"defines {node.name}: a tensor subclass or mode that can fake results")
        self.generic_visit(node)


def check_source(source: str, allowed_modules: frozenset[str] = frozenset(),
                 precision: str = "fp32") -> list[GuardFinding]:
    """Return every finding; an empty list means the candidate may be executed. ``precision`` is
    the campaign's precision mode (fp32, fp16, bf16; fp64), which decides the precision switches."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [GuardFinding("compile_error", exc.lineno or 0, f"syntax error: {exc.msg}")]
    v = _Visitor(frozenset(allowed_modules), precision)
    model_new = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not model_new:
        v.findings.append(GuardFinding("compile_error", 0, "defines no top-level class ModelNew"))
    for cls in model_new:
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id == "Model":
                v.flag(base, "ModelNew inherits the reference Model (falls back to the reference)")
    # imports anywhere (functions included) make their names patchable roots before the walk
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            v.modules.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            v.modules.update(a.asname or a.name for a in node.names)
    v.visit(tree)
    return v.findings
