"""The request across the process boundary (sandbox/harness/request.py): the host writes every
field, the harness parses strictly — an unknown or missing field is named, never a default."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields

import pytest

from arbor.sandbox.harness.request import (MeasureRequest, ProfileRequest, RequestError, read_measure,
                                           write_batch)
from arbor.sandbox.kernel.protocol import HARNESS_PATH, KernelRequest, build_job, wire_request

PROBLEM = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_what_the_host_writes_the_harness_reads_back_field_for_field():
    req = KernelRequest(PROBLEM, PROBLEM, seeds=[3], time_budget_s=0.5, num_threads=2)
    wire = wire_request(req, "nonce-1", cache_key="k" * 64, shipped=True, isa={"vec_isa_ok": True})
    job = build_job(req, "nonce-1")
    parsed = read_measure(job.files["request.json"])
    assert isinstance(parsed, MeasureRequest) and parsed.nonce == "nonce-1" and parsed.seeds == [3]
    assert parsed.extra_time_s == 1.0 and parsed.num_threads == 2 and parsed.compile_cache is None
    assert read_measure(wire.to_json()).compile_cache["vec_isa_ok"] is True
    batch = read_measure(write_batch([wire, wire]))
    assert isinstance(batch, list) and [b.nonce for b in batch] == ["nonce-1", "nonce-1"]


def test_every_knob_of_a_kernel_request_has_its_field_on_the_wire():
    host = {f.name for f in fields(KernelRequest)} - {"problem_source", "candidate_source", "reuse_compiled"}
    assert host <= {f.name for f in fields(MeasureRequest)}


@pytest.mark.parametrize("kind", [MeasureRequest, ProfileRequest])
def test_an_unknown_or_missing_field_fails_naming_it(kind):
    good = wire_request(KernelRequest(PROBLEM, PROBLEM), "n").to_dict() if kind is MeasureRequest else \
        ProfileRequest("p.py", "c.py", "n", {}, None, None, "cpu", None, 10, 1.0, None).to_dict()
    assert kind.from_dict(good).nonce == "n"
    with pytest.raises(RequestError, match=r"unknown field\(s\) time_budjet_s") as e:
        kind.from_dict({**good, "time_budjet_s": 2.0})
    assert "\n" not in str(e.value)
    missing = dict(good)
    del missing["device"]
    with pytest.raises(RequestError, match=r"missing field\(s\) device"):
        kind.from_dict(missing)


def test_the_harness_refuses_a_misspelt_request_with_one_line(tmp_path):
    body = {**wire_request(KernelRequest(PROBLEM, PROBLEM), "n").to_dict(), "sead": [1]}
    (tmp_path / "request.json").write_text(json.dumps(body))
    run = subprocess.run([sys.executable, "-I", "-B", str(HARNESS_PATH), "request.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip() == ("request.json: MeasureRequest: unknown field(s) sead — the host and the "
                                  "harness must come from the same Arbor")
    assert not (tmp_path / "result.json").exists()
