"""The kernel protocol: one measurement of a ``ModelNew`` against its reference, as the host sees it.

``protocol`` (the request, the job, the result and its failure classes), ``peaks`` (the per-host
peak rates a measurement is read against), ``compile_store`` (a compiled candidate's artifacts,
kept under its key between measurements), ``vec_isa`` (Inductor's vector-ISA verdict, probed once
per machine), ``profile_job`` (the bottleneck profile) and ``problem`` (a problem file, read). The
job side — what runs inside the sandbox — is ``arbor.sandbox.harness``.
"""
