"""Say up front when a campaign starts on a busy machine, and what to do about it.

Timings taken beside other work are noisier; Arbor's Critic copes (paired, interleaved rounds,
more rounds when the ratio is noisy), but a user who sees re-measurements or ``unstable``
verdicts later should already know why, and how to avoid them.
"""

from __future__ import annotations

import os


def load_notice(num_threads: int | None, load: float | None = None, cores: int | None = None) -> str | None:
    """One paragraph when the 1-minute load average reaches half the cores, else None."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            return None
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if load < max(0.5 * cores, 0.75):
        return None
    idle = max(0, round(cores - load))
    threads = f"target.num_threads is {num_threads}" if num_threads else "target.num_threads is unset (all cores)"
    fix = "stop other work"
    if not num_threads or num_threads > max(1, idle):  # fewer threads only helps if it changes something
        fix += f", or set target.num_threads to at most {max(1, idle)} so the measurement does not compete for cores"
    return (f"note: the machine is busy (load average {load:.1f} on {cores} core(s)); measurements will "
            f"be noisier and take longer, and some may be re-measured or judged unstable. {threads}; "
            f"about {idle} core(s) are idle. For steadier numbers {fix}.")
