"""Say up front when a campaign starts on a busy machine, and what to do about it.

Wall-clock timings taken beside other work are noisier; Arbor's Critic copes (paired,
interleaved rounds, more rounds when the ratio is noisy), and single-threaded work is timed on CPU
time, which the load does not inflate. A user who sees a slow campaign, re-measurements or
``unstable`` verdicts later should already know why, and how to avoid them.
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
    head = f"note: the machine is busy (load average {load:.1f} on {cores} core(s), about {idle} idle); "
    if num_threads == 1:
        return (head + "with target.num_threads 1 kernels are timed on the timing thread's CPU time, which "
                "that load does not inflate, but the campaign takes longer, and a candidate that runs "
                "more threads is timed on wall time and may be re-measured or judged unstable.")
    threads = f"target.num_threads is {num_threads}" if num_threads else "target.num_threads is unset (all cores)"
    return (head + f"measurements will be noisier and take longer, and some may be re-measured or judged "
            f"unstable. {threads}. For steadier numbers stop other work, or set target.num_threads: 1 "
            "(single-threaded work is timed on CPU time, which other processes' load does not inflate).")
