"""The import phase of one measurement: the reference built and run once, then the candidate imported.

Run by the kernel harness (``Harness.build``) before correctness. Kept apart from the harness's
other phases because it is where foreign code first runs: the problem's module (its sizes
overridden, ``problem_sizes.py``), the reference's first forward (its cost, aliasing and mutations
learnt while nothing else is loaded), the integrity snapshot taken right before the candidate's
module is executed, and the rejections a candidate earns before it is ever called (no
``ModelNew``, a ``ModelNew`` that inherits the reference). Both models get the same seed before
``get_init_inputs``, so their parameters match.

STANDALONE like the harness (stdlib + torch): shipped beside it and loaded by path. It reads the
harness's helpers through ``lib`` (the harness module: ``sizes``, ``cost``, ``classify``,
``Failure``, ``load_module``), the ones the harness loaded by path under its own names.
"""

from __future__ import annotations


def build(h, lib) -> None:  # type: ignore[no-untyped-def]
    """Same seed before get_init_inputs, Model and ModelNew, so their parameters match. The
    reference runs once before the candidate is imported (its cost, aliasing, mutations)."""
    sizes, cost, classify, Failure, load_module = lib.sizes, lib.cost, lib.classify, lib.Failure, lib.load_module
    req, torch, seed = h.req, h.torch, h.seeds[0]
    try:
        h.problem = load_module("arbor_problem", req.problem_file)
        h.result["sizes_applied"] = sizes.apply_sizes(
            h.problem, req.sizes or {}, req.size_scale, h.result["warnings"])
        h.seed_fn(seed)
        init = list(h.problem.get_init_inputs())
        h.seed_fn(seed)
        h.ref = h.to_device(h.problem.Model(*init))
        xs = h.inputs(seed)
        mine = h.clone(xs)
        h.checkpoint("reference forward")
        out = h.call(False, mine)
        h.checker.reference_sane(xs, out)  # None/non-tensor outputs, non-determinism
        h.facts["cost"] = cost.reference_cost(h.ref, h.clone(xs), out)
    except sizes.SizeError as e:
        raise Failure("harness_error", str(e)) from None
    except Failure:
        raise
    except BaseException as e:
        raise classify(e, "harness_error", "the reference problem failed to load/build:")
    h.result["input_shapes"] = [list(x.shape) if isinstance(x, torch.Tensor) else None
                                   for x in xs]
    h.checker.learn_reference(xs, mine, out)
    h.snapshot()
    h.checkpoint("candidate_import")
    new_cls = h.problem.Model  # mode "aa": the reference against itself (noise floor)
    if not h.aa:
        try:
            new_cls = getattr(load_module("arbor_candidate", req.candidate_file),
                              "ModelNew", None)
        except BaseException as e:
            raise classify(e, "compile_error", "the candidate failed to compile/import:")
        if not isinstance(new_cls, type):
            raise Failure("compile_error", "the candidate defines no `class ModelNew` (a "
                          "KernelBench solution must define ModelNew with Model's constructor)")
        if issubclass(new_cls, h.problem.Model):
            raise Failure("hack_suspected", "ModelNew inherits the reference Model (falls back "
                          "to the reference)")
    h.result["candidate_loaded"] = True  # a dead process from here on may be the candidate's doing
    try:
        h.seed_fn(seed)
        h.new = h.to_device(new_cls(*init))
    except BaseException as e:
        raise classify(e, "runtime_error", "ModelNew(*get_init_inputs()) raised:")
    h.verify()
