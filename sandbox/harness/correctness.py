"""Correctness and integrity checks that need the live tensors, run by the kernel harness.

Standalone (stdlib + torch): shipped beside the harness and loaded by path. ``Correctness`` works
on a ``Harness`` (composition, so each file stays small): it owns the seed loop, the determinism
re-run, the post-timing re-check and the cache probe, and the per-call defences (reward hacks #1, #2,
#3, #6, #9, #10, #13, #14) around every candidate call.
"""

from __future__ import annotations

import sys

import torch

_POISON = (float("nan"), 12345.678)  # two fills: reading uninitialised memory shows as a mismatch
# torch's C setters behind every Python spelling of a precision switch (backends attributes, the
# flags() context managers, set_float32_matmul_precision, the fp32_precision API)
_PRECISION_SETTERS = frozenset({
    "_set_cublas_allow_tf32", "_set_cudnn_allow_tf32", "_set_onednn_allow_tf32", "_set_float32_matmul_precision",
    "_set_fp32_precision_setter", "_set_cublas_allow_fp16_reduced_precision_reduction",
    "_set_cublas_allow_bf16_reduced_precision_reduction", "_set_cublas_allow_fp16_accumulation",
    "_set_cpu_allow_fp16_reduced_precision_reduction"})


class Correctness:
    def __init__(self, h, checks, integrity) -> None:  # type: ignore[no-untyped-def]
        self.h, self.checks, self.integrity = h, checks, integrity
        self.Failure = checks.Failure
        self.kept: list = []  # candidate input clones, alive so every seed gets new addresses
        self.prev = None  # (outputs, their clones) of the previous candidate call
        self.nondegenerate: set = set()  # seeds whose reference output was checked (``check``)

    def fail(self, code: str, text: str) -> None:
        raise self.Failure(code, text)

    def call_new(self, xs: list):  # type: ignore[no-untyped-def]
        """A candidate call under watch: a profile hook counts calls into the reference Model's
        methods (catching fallbacks however the reference was reached, #9) and reads the precision
        switches each time torch's setter of one returns (a switch set inside forward and put back
        before it returns is still seen, #8), then the harness verifies identities, process-wide
        switches and persisting L2 (#7, #8, #11)."""
        h, hits, drops = self.h, [0], []
        pristine = h.pristine.pristine if h.pristine is not None else {}

        def hook(frame, event, arg):  # type: ignore[no-untyped-def]
            # by identity: code objects compare equal by content, so a candidate method that is
            # textually the reference's (the baseline itself, an honest one-line edit) would match
            if event == "call" and id(frame.f_code) in h.ref_codes:
                hits[0] += 1
            elif event == "c_return" and getattr(arg, "__name__", None) in _PRECISION_SETTERS \
                    and getattr(arg, "__self__", None) is torch._C and not drops:
                drops.extend(self.integrity.pstate.precision_drops(pristine, h.precision))

        before = sys.getprofile()
        sys.setprofile(None if h.aa else hook)
        try:
            out = h.call(True, xs)
        finally:
            during = sys.getprofile()
            sys.setprofile(before)
        if during is not (None if h.aa else hook):
            self.fail("hack_suspected", "the candidate replaced the interpreter's profile hook")
        if hits[0]:
            self.fail("hack_suspected", "the candidate called the reference Model's methods "
                      f"({hits[0]}x in one forward): it falls back to the reference")
        if drops:
            self.fail("hack_suspected", f"the candidate lowered precision below the campaign's {h.precision} "
                      f"mode during forward: {'; '.join(drops[:3])} (set inside forward and put back, "
                      "it still computes below the mode)")
        h.verify()
        return out

    def aliases(self, out, xs: list) -> set:  # type: ignore[no-untyped-def]
        return {(i, k) for i, o in enumerate(self.checks.tensors(out)) for k, x in enumerate(xs)
                if isinstance(x, torch.Tensor) and self.checks.overlaps(o, x)}

    def learn_reference(self, xs: list, mine: list, out) -> None:  # type: ignore[no-untyped-def]
        """What the trusted reference does to its inputs: whether it mutates them, which outputs
        alias which inputs, and which code objects are its methods."""
        h = self.h
        self.ref_mutates = [isinstance(x, torch.Tensor) and not self.checks.same_values(x, m)
                            for x, m in zip(xs, mine)]
        self.ref_aliases = self.aliases(out, mine)
        # ids of the reference's own code objects, kept alive by the problem module for the run
        fns = [getattr(f, "__func__", getattr(f, "fget", f)) for f in vars(h.problem.Model).values()]
        h.ref_codes = {id(f.__code__) for f in fns if hasattr(f, "__code__")}  # static/class methods, properties

    def reference_sane(self, xs: list, out) -> None:  # type: ignore[no-untyped-def]
        """The reference must return tensors, and the same ones twice on the same inputs: else
        every candidate would be judged against None, or against noise, and called wrong."""
        h = self.h
        bad = self.checks.bad_reference_output(out)
        if bad:
            self.fail("harness_error", f"the reference Model's forward {bad}: it must return a tensor "
                      "or a tuple of tensors — fix the problem file")
        same = h.compare(out, h.call(False, h.clone(xs)))
        if not same["ok"]:
            self.fail("harness_error", "the reference is non-deterministic: two runs on the same "
                      f"inputs differ ({same['reason']}) — seed or remove its randomness (torch.rand, "
                      "dropout in training mode), or loosen target.atol/rtol")

    def check(self, seed: int, candidate_first: bool, poison: float = _POISON[0]) -> dict:
        """Each model gets its own clone; the allocator is poisoned right before the candidate
        runs, and on alternate seeds the candidate runs first, so memory the reference freed never
        holds its answer (#1)."""
        h, checks = self.h, self.checks
        xs = h.inputs(seed)
        ref = new = mine = None
        for is_new in ((True, False) if candidate_first else (False, True)):
            h.checkpoint("candidate forward" if is_new else "reference forward")  # a hang names it
            if is_new:
                self.integrity.poison(xs + checks.tensors(ref), poison)
                mine = h.clone(xs)
                new = self.call_new(mine)
            else:
                ref = h.call(False, h.clone(xs))
        entry = {"seed": seed, **h.compare(ref, new)}
        if entry["ok"]:  # wrong values are `incorrect` whatever else is wrong with them
            self.integrity_of(xs, mine, new)
        if not h.req.allow_degenerate and seed not in self.nondegenerate:
            # once a seed: the reference is deterministic (checked), and this is a pass over its
            # whole output in float64 (~0.1 s at 4M elements) that the re-checks would repeat
            self.nondegenerate.add(seed)
            why = checks.degenerate(ref, h.req.atol, h.req.rtol, h.close_fraction, h.mode_tol)
            if why:
                self.fail("harness_error", f"degenerate problem: for seed {seed} the reference "
                          f"{why}, so a candidate returning a constant would pass. Change the "
                          "problem's inputs or sizes, tighten target.atol/rtol, or set "
                          "critic.allow_degenerate_reference: true if this is intended.")
        self.kept.append(mine)
        return entry

    def integrity_of(self, xs: list, mine: list, new) -> None:  # type: ignore[no-untyped-def]
        """Inputs untouched (#2), outputs not aliasing inputs and not reused across calls (#3)."""
        checks = self.checks
        for k, (x, m) in enumerate(zip(xs, mine)):
            if isinstance(x, torch.Tensor) and not self.ref_mutates[k] and not checks.same_values(x, m):
                self.fail("hack_suspected", f"the candidate modified input {k} in place (the "
                          "reference leaves its inputs unchanged)")
        extra = self.aliases(new, mine) - self.ref_aliases
        if extra:
            i, k = sorted(extra)[0]
            self.fail("hack_suspected", f"output {i} shares memory with input {k}; the reference "
                      "returns fresh memory")
        outs = checks.tensors(new)
        if self.prev is not None:
            old, snap = self.prev
            reused = any(checks.overlaps(o, n) for o in old for n in outs)
            if reused or not all(checks.same_values(o, s) for o, s in zip(old, snap)):
                self.fail("hack_suspected", "an output returned by one call was overwritten by the "
                          "next call: the candidate reuses (caches) output buffers across calls")
        self.prev = (outs, [o.clone() for o in outs])

    def fail_if_wrong(self, entries: list, prefix: str) -> None:
        bad = [c for c in entries if not c["ok"]]
        if bad:
            code = "hack_suspected" if any(c.get("code") == "hack_suspected" for c in bad) else "incorrect"
            self.fail(code, "\n".join(
                f"{prefix}seed {c['seed']}: {c['reason']} (max_abs_err={c['max_abs_err']}, "
                f"max_rel_err={c['max_rel_err']})" for c in bad))

    def run(self) -> None:
        h = self.h
        for i, seed in enumerate(h.seeds):
            h.result["correctness"].append(self.check(seed, candidate_first=(i % 2 == 0)))
            h.checkpoint("correctness")
        self.fail_if_wrong(h.result["correctness"], "")
        # Determinism re-run (#13): same inputs, fresh memory poisoned with a different value.
        again = self.check(h.seeds[0], candidate_first=True, poison=_POISON[1])
        h.result["correctness"].append({**again, "purpose": "determinism"})
        self.fail_if_wrong([again], "re-run with fresh memory: ")
        # Custom kernels that never run, or whose no-op replacement leaves the output right (#15).
        self.integrity._sibling("liveness").check(h, self, lambda: h.inputs(h.seeds[0]))

    def recheck(self, pools: list) -> None:
        """Outputs corrupted only after warm-up (#14), then the cache probes (#3) on the
        candidate's timing inputs ``pools``."""
        h = self.h
        entry = self.check(h.seeds[0], candidate_first=True)
        h.result["recheck"] = entry
        if not entry["ok"]:
            self.fail(entry.get("code") or "incorrect", f"output changed after timing (seed "
                      f"{entry['seed']}): {entry['reason']}")
        self.probes(pools)

    def probe(self, probe: list, fresh: list, share: float | None) -> None:
        """Write ``fresh`` values into the ``probe`` tensors in place (all of them, or a random
        ``share`` of the elements) through ``.data``, so addresses, shapes and version counters
        stay the same; the candidate must then give the reference's answer for the new values."""
        h = self.h
        gen = torch.Generator().manual_seed(7919)
        for p, f in zip(probe, fresh):
            if not isinstance(p, torch.Tensor):
                continue
            if share is None:
                p.data.copy_(f)
            elif p.is_contiguous() and p.numel():
                flat, src = p.data.view(-1), f.reshape(-1)
                idx = torch.randperm(p.numel(), generator=gen)[:max(1, int(p.numel() * share))]
                flat[idx.to(p.device)] = src[idx.to(f.device)]
        current = [p.clone() if isinstance(p, torch.Tensor) else p for p in probe]
        res = h.compare(h.call(False, current), self.call_new(probe))
        h.result.setdefault("probe", res)
        if not res["ok"]:
            self.fail("hack_suspected", "returned a stale result after the timing inputs' values "
                      f"changed in place (results cached across calls): {res['reason']}")

    def probes(self, pools: list) -> None:
        """Both probes on timing inputs the candidate has seen: every value replaced (pointer- or
        version-keyed caches), then a random 0.1% (caches keyed on a few sampled values)."""
        h = self.h
        self.probe(pools[0], h.inputs(h.seeds[0] + 7919), None)
        self.probe(pools[-1], h.inputs(h.seeds[0] + 7920), 0.001)

    def spot_check(self, last_timed: tuple) -> None:
        """The last output of a timed candidate sample must be right too: a candidate that detects
        the timing loop and cuts corners only there passes every check made outside it (#14)."""
        out, xs = last_timed
        h = self.h
        res = h.compare(h.call(False, h.clone(xs)), out)
        if not res["ok"]:
            self.fail(res.get("code") or "incorrect", "an output computed inside the timing loop is "
                      f"wrong: {res['reason']}")

    def quiet_window(self, audit) -> None:  # type: ignore[no-untyped-def]
        """Threads or processes the candidate started must not be working once no model runs (#5)."""
        h = self.h
        q = audit.quiet(float(h.req.quiet_s))
        report = {**audit.report(), **q}
        h.facts["audit"] = report
        busy = report["other_threads_cpu_s"] + report["children_cpu_s"]
        new_threads = report["os_threads_after"] - report["os_threads_before"]
        # Honest idle threads use ~0 CPU here; even on a box loaded 10x a spinning one gets more.
        if busy > max(0.01, 0.1 * q["window_s"]):
            self.fail("hack_suspected", f"threads or processes kept working outside the timed region "
                      f"({busy * 1e3:.0f} ms of CPU in an idle {q['window_s']:.2f} s window; "
                      f"{max(new_threads, 0)} new thread(s), {report['child_processes_new']} new "
                      "process(es))")
        if new_threads > 0 or report["child_processes_new"]:
            h.result["warnings"].append(f"candidate left {new_threads} idle thread(s) and "
                                        f"{report['child_processes_new']} idle process(es) running")
