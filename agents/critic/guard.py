"""Static guard: an AST pass over a candidate before it is ever executed.

Text regexes are trivially dodged (``getattr(__import__('subpro'+'cess'), ...)``), so this walks
the syntax tree and flags the *constructs* used by known reward hacks
(docs/integrity.md#reward-hacks): falling back to the reference, importing process/network/FFI
modules, patching timers, the checker or library functions, changing process-wide precision,
intercepting the reference's ops (dispatch modes, aten overrides), reading files, and the dynamic
execution and introspection that would hide any of the former. It is the first of two lines:
the harness re-checks the same classes at run time.
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
    ("torch", "set_float32_matmul_precision"): _PRECISION, ("torch", "set_default_dtype"): _PRECISION,
    ("torch", "set_default_tensor_type"): _PRECISION,
}
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


class _Visitor(ast.NodeVisitor):
    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed
        self.findings: list[GuardFinding] = []
        self.modules: set[str] = set(PATCHED_ROOTS)

    def flag(self, node: ast.AST, reason: str) -> None:
        self.findings.append(GuardFinding("hack_suspected", getattr(node, "lineno", 0), reason))

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
                    root = _root_name(sub)
                    if root in self.modules and root != "self":
                        self.flag(node, f"assigns to {_dotted(sub)}: monkey-patching library or timer code")
                        return

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
        elif node.attr in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                           "allow_bf16_reduced_precision_reduction", "fp32_precision") \
                and isinstance(node.ctx, ast.Store):
            self.flag(node, f"sets {_dotted(node)}: {_PRECISION}")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name in INTERCEPTORS:
            self.flag(node, f"defines {node.name}: a tensor subclass or mode that can fake results")
        self.generic_visit(node)


def check_source(source: str, allowed_modules: frozenset[str] = frozenset()) -> list[GuardFinding]:
    """Return every finding; an empty list means the candidate may be executed."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [GuardFinding("compile_error", exc.lineno or 0, f"syntax error: {exc.msg}")]
    v = _Visitor(frozenset(allowed_modules))
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
