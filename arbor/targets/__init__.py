"""Target adapters: what differs between optimizing a kernel and a serving config.

The loop (``arbor.steps``) is target-agnostic; it asks the campaign's adapter for the baseline
artifact, how to measure a candidate and how the Critic should judge the result. A new kind of
target is a new adapter plus a spec model, never an edit to the loop.
"""

from .base import TargetAdapter, make_adapter

__all__ = ["TargetAdapter", "make_adapter"]
