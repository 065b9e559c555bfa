"""Generated Triton kernels: which problems get one, are they right, and (on a GPU) are they fast.

For every problem file in a folder and every ``triton_codegen`` move of the shipped skill, the move
is applied to the reference (as ``ModelNew``); a problem it does not apply to is listed with the
matcher's reason. Each generated kernel is run against the reference on two seeds with the
harness's tolerances for the dtype; on CUDA both are then timed (CUDA events, median of the
calls after a warm-up that includes Triton's JIT compile). On the CPU the kernels run through
Triton's interpreter (``TRITON_INTERPRET=1``) at sizes scaled down until the inputs hold at most
``--max-elements`` values: correctness only, the interpreter's times mean nothing.

    python -m benchmarks.triton_kernels                              # benchmarks/problems_gpu, cuda if present
    python -m benchmarks.triton_kernels --dir benchmarks/problems --device cpu
Writes benchmarks/results/triton_kernels_<device>.json; exits 1 when a generated kernel is wrong.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, table, write_result

TOLERANCE = {"torch.float32": 1e-4, "torch.float16": 1e-2, "torch.bfloat16": 1e-2}
CPU_MAX_ELEMENTS = 1 << 14


def triton_moves() -> list:
    """The shipped ``triton_codegen`` moves (id, params)."""
    from arbor.agents.skills import load_skills

    return [m for s in load_skills() for m in s.moves if m.transform == "triton_codegen"]


def load_file(path: Path, name: str):  # type: ignore[no-untyped-def]
    """Import a module from a file: Triton's JIT reads a kernel's source from its file."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def scale_for(path: Path, max_elements: int | None) -> float | None:
    """The largest power-of-two scale (<= 1) whose inputs hold at most ``max_elements`` values
    (None: the problem's own sizes). Inputs are built on the meta device: nothing is allocated."""
    if max_elements is None:
        return None
    import torch

    from arbor.sandbox.harness.problem_sizes import apply_sizes

    scale = 1.0
    while scale > 1e-3:
        module = load_file(path, f"arbor_scale_probe_{time.monotonic_ns()}")
        apply_sizes(module, {}, scale)
        with torch.device("meta"):
            n = sum(x.numel() for x in module.get_inputs() if isinstance(x, torch.Tensor))
        if n <= max_elements:
            return scale
        scale /= 2
    return scale


def run_pair(problem: Path, candidate_source: str, scale: float | None, device: str,
             seeds: tuple[int, ...] = (0, 1), time_calls: int = 0, dtype: str | None = None) -> dict:
    """Reference vs candidate at ``scale`` on ``device`` (in ``dtype``, default the problem's):
    max error, correctness and (optionally) the median times of ``time_calls`` calls each."""
    return run_candidates(problem, {"candidate": candidate_source}, scale, device, seeds, time_calls,
                          dtype)["candidate"]


def run_candidates(problem: Path, sources: dict[str, str], scale: float | None, device: str,  # noqa: C901
                   seeds: tuple[int, ...] = (0, 1), time_calls: int = 0, dtype: str | None = None) -> dict:
    """``run_pair`` for several candidates of one problem: the reference, its inputs and its
    outputs are built once per seed (on the device itself: host-side generation of a GPU-sized
    input costs more than the kernels)."""
    import torch

    from arbor.sandbox.harness.problem_sizes import apply_sizes

    cast = getattr(torch, dtype) if dtype else None
    with tempfile.TemporaryDirectory() as tmp:
        tag = time.monotonic_ns()
        ref = load_file(problem, f"arbor_triton_ref_{tag}")
        apply_sizes(ref, {}, scale)
        news = {}
        for i, (key, source) in enumerate(sources.items()):
            path = Path(tmp) / f"arbor_triton_candidate_{i}.py"  # Triton's JIT reads the kernel's file
            path.write_text(source)
            news[key] = load_file(path, f"arbor_triton_new_{tag}_{i}")
            apply_sizes(news[key], {}, scale)
        out = {key: {"ok": True, "max_err": 0.0} for key in sources}
        for seed in seeds:
            with torch.device(device):
                torch.manual_seed(seed)
                model = ref.Model(*ref.get_init_inputs()).to(device, cast)
                torch.manual_seed(1000 + seed)
                xs = [x.to(device, cast if x.is_floating_point() else None) if isinstance(x, torch.Tensor) else x
                      for x in ref.get_inputs()]
            with torch.no_grad():
                want = model(*xs)
            tol = TOLERANCE.get(str(want.dtype), 1e-4)
            for key, new in news.items():
                row = out[key]
                if not row["ok"]:
                    continue
                try:
                    with torch.device(device):
                        torch.manual_seed(seed)
                        cand = new.ModelNew(*new.get_init_inputs()).to(device, cast)
                    with torch.no_grad():
                        got = cand(*xs)
                except Exception as exc:  # noqa: BLE001 - a kernel that raises is a wrong kernel
                    row.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
                    continue
                row["shape"] = list(want.shape)
                if got.shape != want.shape or got.dtype != want.dtype:
                    row.update(ok=False, error=f"shape/dtype {tuple(got.shape)}/{got.dtype}, want "
                                               f"{tuple(want.shape)}/{want.dtype}")
                    continue
                err = (got.float() - want.float()).abs().max().item() if want.numel() else 0.0
                row["max_err"] = max(row["max_err"], err)
                row["ok"] = bool(torch.allclose(got, want, atol=tol, rtol=tol))
                if time_calls and seed == seeds[-1] and row["ok"]:
                    row["kernel_ms"] = _median_ms(cand, xs, time_calls)
            if time_calls and seed == seeds[-1]:
                eager = _median_ms(model, xs, time_calls)
                for row in out.values():
                    row["eager_ms"] = eager
        return out


def interpret_pairs(jobs: list[dict], timeout_s: float = 600.0) -> list[dict]:
    """``run_pair`` for each job (``problem``, ``candidate`` source, ``scale``, ``seeds``, ``dtype``)
    through Triton's interpreter, in a child process.

    The interpreter must be on before ``triton.language`` is first imported: its own helpers
    (``tl.sum``, ``tl.sigmoid``) are ``@triton.jit`` functions, compiled or interpreted for good
    when that module loads. A child started with ``TRITON_INTERPRET=1`` is the one place where that
    holds whatever the calling process imported, and it leaves the caller's Triton untouched."""
    with tempfile.TemporaryDirectory() as tmp:
        specs = []
        for i, job in enumerate(jobs):
            cand = Path(tmp) / f"candidate_{i}.py"
            cand.write_text(job["candidate"])
            specs.append({**job, "candidate": str(cand), "problem": str(job["problem"])})
        (Path(tmp) / "jobs.json").write_text(json.dumps(specs))
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        res = subprocess.run([sys.executable, "-m", "benchmarks.triton_kernels", "--pairs", str(Path(tmp) / "jobs.json")],
                             capture_output=True, text=True, timeout=timeout_s, env=env, cwd=ROOT)
        if res.returncode != 0:
            raise RuntimeError(f"the interpreter child failed: {(res.stderr.strip().splitlines() or ['?'])[-1]}")
        return json.loads(res.stdout.strip().splitlines()[-1])


def _pairs(jobs_file: Path) -> list[dict]:
    out = []
    for job in json.loads(jobs_file.read_text()):
        try:
            out.append(run_pair(Path(job["problem"]), Path(job["candidate"]).read_text(), job.get("scale"), "cpu",
                                tuple(job.get("seeds", (0, 1))), dtype=job.get("dtype")))
        except Exception as exc:  # noqa: BLE001 - a kernel that raises is a wrong kernel, reported
            out.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
    return out


def _median_ms(model, xs, calls: int) -> float:  # type: ignore[no-untyped-def]
    import torch

    with torch.no_grad():
        for _ in range(3):
            model(*xs)
        torch.cuda.synchronize()
        times = []
        for _ in range(calls):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*xs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def check_dir(directory: Path, device: str, max_elements: int | None, say=print,  # type: ignore[no-untyped-def]
              only: set[str] | None = None) -> list[dict]:
    """One row per (problem, move) of ``directory`` (``only``: these file stems)."""
    from arbor.agents.transforms import apply_move, to_modelnew
    from arbor.agents.transforms.triton import explain

    rows = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_") or (only is not None and path.stem not in only):
            continue
        reference = path.read_text()
        base = to_modelnew(reference)
        why = explain(base)
        if why is not None:
            rows.append({"problem": path.stem, "move": "-", "result": f"not offered: {why}"})
            say(f"{path.stem}: not offered ({why})")
            continue
        scale = scale_for(path, max_elements)
        moves = []
        sources = {}
        for m in triton_moves():  # a block shorter than a row another move holds is not offered
            src = apply_move(base, m.transform, m.params)
            if src is None:
                why = explain(base, m.params["block"]) or "the move does not apply"
                rows.append({"problem": path.stem, "move": m.id, "result": f"not offered: {why}"})
                say(f"{path.stem} {m.id}: not offered ({why})")
            else:
                moves.append(m)
                sources[m.id] = src
        try:
            results = run_candidates(path, sources, scale, device, seeds=(0,) if device == "cuda" else (0, 1),
                                     time_calls=20 if device == "cuda" else 0)
        except Exception as exc:  # noqa: BLE001 - the reference itself failed at this size: reported
            text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            results = {m.id: {"ok": False, "error": f"reference: {text}"} for m in moves}
        for move in moves:
            row = {"problem": path.stem, "move": move.id, "scale": scale,
                   "scale_text": "1" if scale is None else f"{scale:g}", **results[move.id]}
            row["result"] = "correct" if row.get("ok") else f"WRONG {row.get('error', '')}".strip()
            if row.get("kernel_ms"):
                row["speedup"] = row["eager_ms"] / row["kernel_ms"]
            rows.append(row)
            say(f"{path.stem} {move.id}: {row['result']} (max err {row.get('max_err', float('nan')):.2e})")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "benchmarks" / "problems_gpu")
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    ap.add_argument("--max-elements", type=int, default=None,
                    help=f"scale inputs down to this many values (CPU default {CPU_MAX_ELEMENTS})")
    ap.add_argument("--pairs", type=Path, default=None, help=argparse.SUPPRESS)  # interpret_pairs' child
    args = ap.parse_args(argv)
    if args.pairs is not None:
        print(json.dumps(_pairs(args.pairs), default=str))
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is decorated
    max_elements = args.max_elements or (CPU_MAX_ELEMENTS if device == "cpu" else None)
    started = time.monotonic()
    rows = check_dir(args.dir, device, max_elements)
    print(table(rows, [("problem", "problem"), ("move", "move"), ("scale_text", "scale"), ("result", "result"),
                       ("eager_ms", "eager ms"), ("kernel_ms", "kernel ms"), ("speedup", "speedup")]))
    path = write_result(f"triton_kernels_{device}", {"dir": str(args.dir), "device": device,
                                                     "interpreted": device == "cpu", "rows": rows}, started)
    print(f"results: {path}")
    return 0 if all(r.get("ok", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
