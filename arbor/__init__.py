"""Arbor: an autonomous optimization harness for GPU kernels and LLM-serving configurations.

Kept import-free on purpose: ``arbor.sandbox`` and ``arbor.search_tree`` are imported by the
measurement harness and by benchmarks, and must not drag in the CLI, LangGraph or the agents.
"""

__version__ = "0.1.0"
