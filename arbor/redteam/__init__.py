"""``arbor redteam``: hostile candidates generated against the Critic, and their honest twins.

A hand-written corpus (``tests/adversarial/``) trails the next idea; this package writes the ideas
itself, for any KernelBench problem, and runs them through the path every candidate takes
(``arbor eval``: static guard, sandboxed harness, the Critic's gates), so a defence that is
missing or switched off shows up as an accepted cheat.

- ``catalogue``: the hack classes of docs/integrity.md#reward-hacks as payloads (what a cheat
  does: tax the reference through a hook, patch a library function, cache outputs, ...), the
  disguises they are written in (how names are reached, when the payload switches on) and the
  benign payload of each class's honest twin;
- ``codegen``: renders one (payload, disguise) onto a problem's own ``ModelNew``;
- ``generator``: which variants, deterministic for a seed;
- ``runner``: one throw-away campaign (``arbor/campaign/evaluate.py``'s), every variant enqueued;
- ``report``: attack success and false positives per class and disguise, worst offenders, JSON;
- ``llm``: the LLM red-team role, writing new variants from the classes' descriptions and the
  Critic's past verdicts (never the checker's source).
"""

from .catalogue import CLASSES, DISGUISES
from .generator import Variant, generate

__all__ = ["CLASSES", "DISGUISES", "Variant", "generate"]
