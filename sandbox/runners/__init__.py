"""The runners a job runs in, and what they run it with.

``local`` (``LocalRunner``: a forked child under the isolation layers of ``isolation`` —
``landlock``, ``seccomp``, ``private_ns`` — with warm workers from ``forkserver``/``warm_worker``,
killed as a tree by ``proctree`` and ``watchdog``) and ``docker`` (``DockerRunner``: a warm
container per campaign and device, its image from ``images``, its in-container scripts in
``docker_scripts``). ``jobio`` is what both share about a job's files and environment, ``host_facts``
the host's fingerprint. The contract and the factory are ``arbor.sandbox.runner``; this package
imports nothing at import time, so a module here never loads the others.
"""
