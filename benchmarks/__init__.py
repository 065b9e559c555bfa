"""Performance benchmarks (not tests): search efficiency, harness overhead, fidelity, store scale.

Run from the repository root, e.g. ``python -m benchmarks.search_efficiency``; each prints a table
and writes JSON to ``benchmarks/results/``.
"""
