"""Offline kernel Specialist: applies skill-declared AST moves to a parent's ModelNew source.

Every applicable, untried move is offered (the shared behaviour of ``HeuristicSpecialist``);
whether a rewrite is legal for this source is the transform's own decision.
"""

from __future__ import annotations

from .heuristic import HeuristicSpecialist


class HeuristicKernelSpecialist(HeuristicSpecialist):
    name = "kernel-heuristic"
