"""Serving targets: an OpenAI-compatible server, its knobs, a load profile and latency SLOs.

The artifact of a node is the canonical JSON of its knob values (node 1 holds the defaults).
Measuring a node starts the baseline server and the candidate server from the launch template,
drives the load profile on both in interleaved rounds (``arbor.sandbox.serving.protocol``) and
stores the raw per-level metrics; the Critic's serving gates turn them into a verdict. The
baseline itself is measured A/A (two servers of the same config) to set the noise floor.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shlex
import shutil
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

from arbor.agents.contracts import Judgement
from arbor.agents.critic.gates import Evidence
from arbor.agents.critic.serving_gates import ServingCriticConfig, final_ratio, judge_serving, score
from arbor.agents.skills import MoveSpec, SkillSpec
from arbor.agents.specialists.serving_heuristic import serving_moves
from arbor.agents.transforms.knobs import canonical_config, parse_config
from arbor.sandbox.runner import Runner
from arbor.sandbox.serving.leases import cleanup_stale
from arbor.sandbox.serving.lifecycle import ServerConfig
from arbor.sandbox.serving.loadgen import Level, LoadConfig
from arbor.sandbox.serving.metrics import Slo
from arbor.sandbox.serving.protocol import AccuracyProbe, ServingRequest, measure_serving
from arbor.sandbox.serving.workload import DatasetError, LengthDist, dataset_requests, synthetic_requests
from arbor.search_tree.records import MeasurementRecord

from arbor.spec import SpecError
from arbor.spec.serving import LLAMACPP_BUILTINS, PLACEHOLDER, ServingTarget
from .base import TargetAdapter


class ServingAdapter(TargetAdapter):
    kind = "serving"
    artifact_kind = "serving_config"
    best_artifact_name = "best_config.json"
    # the best and its contenders are re-measured before the campaign reports, like kernels: each
    # final measurement must pass the requests and accuracy gates (serving_gates.final_ratio)
    verify_best = True
    reports_times = False  # samples are req/s, not seconds: the fronts tell the story
    score_label = "objective ratio vs baseline (x)"
    has_pareto_front = True

    @property
    def t(self) -> ServingTarget:
        return self.spec.target

    # --- configs -------------------------------------------------------------------------
    def canonical(self, config: dict) -> str:
        return canonical_config(config)

    def parse_artifact(self, text: str) -> dict:
        cfg = parse_config(text)
        if cfg is None:
            raise ValueError("a serving artifact is a JSON object of knob values")
        return cfg

    def config_problem(self, text: str) -> str | None:
        """Why this config may not run (unknown or missing knob, value outside the table)."""
        cfg = parse_config(text)
        if cfg is None:
            return "not a JSON object of knob values"
        unknown = sorted(set(cfg) - set(self.t.knobs))
        if unknown:
            return f"unknown knob(s) {', '.join(unknown)}"
        missing = sorted(set(self.t.knobs) - set(cfg))
        if missing:
            return f"missing knob(s) {', '.join(missing)}"
        for name, knob in self.t.knobs.items():
            if (p := knob.problem(name, cfg[name])) is not None:
                return p
        return None

    def knob_space(self) -> dict[str, dict]:
        return {name: {"kind": k.kind, "choices": k.choices, "min": k.min, "max": k.max,
                       "description": k.description} for name, k in self.t.knobs.items()}

    def builtins(self) -> dict[str, str]:
        out = {"model": self.t.model, "python": sys.executable, "campaign_dir": str(self.spec.base_dir.resolve())}
        if self._uses_llamacpp():
            from arbor.sandbox.serving.llamacpp_install import model_path, server_binary

            binary, gguf = server_binary(), model_path()
            out.update(llama_server=str(binary) if binary else "{llama_server}",
                       llama_model=str(gguf) if gguf else "{llama_model}")
        return out

    def _uses_llamacpp(self) -> bool:
        texts = self.t.argv_template() + list(self.t.env.values())
        return any(f"{{{b}}}" in t for t in texts for b in LLAMACPP_BUILTINS)

    def _fill(self, text: str, cfg: dict) -> str:
        values = self.builtins()

        def sub(m):
            name = m.group(1)
            if name in self.t.knobs:
                return self.t.knobs[name].render(cfg.get(name))
            return values.get(name, m.group(0))  # {port} / {host}: filled at start-up

        return PLACEHOLDER.sub(sub, text)

    def render_argv(self, cfg: dict) -> list[str]:
        argv: list[str] = []
        for token in self.t.argv_template():
            m = PLACEHOLDER.fullmatch(token)
            if m and m.group(1) in self.t.knobs:  # a whole-token knob may expand to 0..n tokens
                argv.extend(shlex.split(self._fill(token, cfg)))
            else:
                argv.append(self._fill(token, cfg))
        return argv

    def render_env(self, cfg: dict) -> dict[str, str]:
        return {k: self._fill(v, cfg) for k, v in self.t.env.items()}

    # --- adapter contract ------------------------------------------------------------------
    @property
    def lease_dir(self) -> Path:
        return self.spec.runs_dir() / "servers"

    def validate(self) -> None:
        if self._uses_llamacpp():
            from arbor.sandbox.serving.llamacpp_install import missing_reason

            if (why := missing_reason()) is not None:
                raise SpecError([f"target.command: {why}"])
        argv = self.render_argv(self.t.defaults())
        if not argv:
            raise SpecError(["target.command: empty — give the server's launch command"])
        exe = argv[0]
        if shutil.which(exe) is None and not Path(exe).is_file():
            raise SpecError([f"target.command: {exe!r} is not installed here (not on PATH) — install the "
                             "server (e.g. pip install vllm) or run on a machine that has it"])
        if len(argv) > 2 and argv[1] == "-m" and Path(exe).resolve() == Path(sys.executable).resolve():
            module = argv[2].split(".")[0]
            if importlib.util.find_spec(module) is None:
                raise SpecError([f"target.command: Python module {module!r} is not installed here — pip install it "
                                 "(e.g. pip install \"sglang[all]\") or run on a machine that has it"])
        for token in argv[1:]:
            if token.endswith(".py") and not Path(token).is_file() and "{" not in token:
                raise SpecError([f"target.command: script {token} not found — check the path "
                                 "({campaign_dir} is the folder of the campaign file)"])
        if self.t.load.dataset:
            self._requests()  # raises a one-line SpecError for a bad dataset
        if self.t.accuracy.dataset:
            self._probe_requests()
        cleanup_stale(self.lease_dir)  # servers left by a kill -9'd run of this campaign

    def root_source(self) -> str:
        return canonical_config(self.t.defaults())

    def moves(self, skills: list[SkillSpec]) -> list[MoveSpec]:
        return serving_moves(skills, self.t.engine, set(self.t.knobs))

    @cached_property
    def critic_cfg(self) -> ServingCriticConfig:
        s, a = self.t.slo, self.t.accuracy
        return ServingCriticConfig(ttft_ms=s.ttft_ms, tpot_ms=s.tpot_ms, e2e_ms=s.e2e_ms, percentile=s.percentile,
                                   metric=self.spec.objective.metric, latency_margin=self.t.latency_margin,
                                   max_logprob_diff=a.max_logprob_diff, min_prefix_match=a.min_prefix_match)

    def _requests(self):
        load = self.t.load
        n = (load.num_prompts or 512) + load.warmup_requests
        if load.dataset:
            path = Path(load.dataset).expanduser()
            path = path if path.is_absolute() else self.spec.base_dir / path
            try:
                return dataset_requests(path, n, load.dataset_output_len, self.t.api)
            except DatasetError as err:
                raise SpecError([f"target.load.dataset: {err}"]) from None
        syn = load.synthetic
        return synthetic_requests(n, LengthDist(syn.input_len.mean, syn.input_len.range_ratio),
                                  LengthDist(syn.output_len.mean, syn.output_len.range_ratio), syn.seed,
                                  syn.prefix_len, self.t.api)

    def _probe_requests(self):
        a = self.t.accuracy
        if a.dataset is None:
            return synthetic_requests(a.prompts, LengthDist(a.prompt_len), LengthDist(a.max_tokens), a.seed, 0,
                                      self.t.api)
        path = Path(a.dataset).expanduser()
        path = path if path.is_absolute() else self.spec.base_dir / path
        try:  # every written prompt once, each answer capped at max_tokens
            rows = dataset_requests(path, a.prompts, a.max_tokens, self.t.api)
        except DatasetError as err:
            raise SpecError([f"target.accuracy.dataset: {err}"]) from None
        return [dataclasses.replace(r, max_tokens=min(r.max_tokens, a.max_tokens)) for r in rows]

    def output_changes(self, cfg: dict) -> dict[str, Any]:
        """The output-changing knobs this config moves off the baseline (named in a rejection)."""
        from arbor.targets.numerics_knobs import changes_outputs  # declared, or dtype/quantization/speculative

        base = self.t.defaults()
        return {n: cfg.get(n) for n, k in self.t.knobs.items() if changes_outputs(n, k) and cfg.get(n) != base[n]}

    def _server(self, cfg: dict, label: str) -> ServerConfig:
        t = self.t
        mem = int(t.memory_gb * (1 << 30)) if t.memory_gb else None
        return ServerConfig(argv=self.render_argv(cfg), env=self.render_env(cfg), health_path=t.health_path,
                            startup_timeout_s=t.startup_timeout_s, stop_grace_s=t.stop_grace_s, memory_bytes=mem,
                            lease_dir=self.lease_dir, label=label, passthrough=tuple(t.env_passthrough))

    def needs_accuracy(self, cfg: dict) -> bool:
        return self.t.accuracy.always or bool(self.output_changes(cfg))

    def request(self, source: str) -> ServingRequest:
        t, load = self.t, self.t.load
        cfg = self.parse_artifact(source)
        aa = source == self.root_source()
        probe = None
        if not aa and self.needs_accuracy(cfg):
            probe = AccuracyProbe(self._probe_requests(), knobs=self.output_changes(cfg))
        if load.concurrency is not None:
            levels = [Level(concurrency=c) for c in load.concurrency]
        else:
            levels = [Level(rate=r, max_concurrency=load.max_concurrency) for r in load.request_rates or []]
        lc = LoadConfig(api=t.api, model=t.model, num_prompts=load.num_prompts, duration_s=load.duration_s,
                        warmup_requests=load.warmup_requests, request_timeout_s=load.request_timeout_s,
                        temperature=load.temperature, ignore_eos=load.ignore_eos, extra_body=dict(load.extra_body),
                        slo=Slo(t.slo.ttft_ms, t.slo.tpot_ms, t.slo.e2e_ms), metrics_path=load.metrics_path,
                        seed=load.synthetic.seed if load.synthetic else 0)
        return ServingRequest(
            baseline=self._server(t.defaults(), "baseline"),
            candidate=self._server(cfg, "baseline-2" if aa else "candidate"),
            load=lc, requests=self._requests(), levels=levels, repeats=load.repeats, server_mode=t.server_mode,
            accuracy=probe, timeout_s=self.spec.sandbox.timeout_s, lease_dir=self.lease_dir)

    def measure(self, runner: Runner, source: str, timeout_s: float | None = None) -> dict:
        """Servers are started here (their lifecycle is the protocol); ``runner`` runs jobs to
        completion and has no notion of a service, so it is not used for serving."""
        result = measure_serving(self.request(source))
        raw = result["stats"]["serving"]
        if result["status"] == "ok":
            c = self.spec.critic
            sc = score(raw, self.critic_cfg, c.bootstrap_resamples, c.confidence, self.spec.agents.seed)
            if sc is not None:
                result["baseline_samples"], result["candidate_samples"] = sc.baseline, sc.candidate
                result["stats"].update(speedup=sc.ratio, metric=sc.metric)
        return result

    def judge(self, critic, ev: Evidence, m: MeasurementRecord) -> Judgement:
        raw = (m.stats or {}).get("serving")
        return judge_serving(ev, raw, critic.config, self.critic_cfg)

    def final_ratio(self, m: MeasurementRecord) -> float | None:
        if m.status != "ok":
            return None
        return final_ratio((m.stats or {}).get("serving"), self.spec.critic.gate_config(self.spec.agents.seed),
                           self.critic_cfg)

    def static_check(self, critic, source: str) -> Judgement | None:
        problem = self.config_problem(source)
        if problem is None:
            return None
        return Judgement("reject", "invalid_config", problem, "rejected",
                         gates=[{"gate": "guard", "passed": False, "reason": problem}])

    def symptoms(self, m: MeasurementRecord | None) -> dict[str, Any] | None:
        """The candidate side's symptoms of a measurement, plus pXX/SLO ratios (> 1: violated)."""
        if m is None or m.status != "ok":
            return None
        sym = dict(((m.stats or {}).get("serving") or {}).get("symptoms", {}).get("candidate") or {})
        q = self.t.slo.percentile
        for metric, limit in (("ttft", self.t.slo.ttft_ms), ("tpot", self.t.slo.tpot_ms), ("e2e", self.t.slo.e2e_ms)):
            v = sym.get(f"{metric}_p{q}_ms")
            if limit and v is not None:
                sym[f"{metric}_slo_ratio"] = v / limit
        return sym

    def describe(self) -> str:
        load = self.t.load
        levels = (f"concurrency {load.concurrency}" if load.concurrency is not None
                  else f"request rates {load.request_rates}")
        return f"serving {self.t.engine} '{self.t.model}' ({len(self.t.knobs)} knobs; {levels})"


    # --- agents --------------------------------------------------------------------------
    def heuristic_specialist(self, skills: list[SkillSpec], seed: int, store=None):
        """The knob specialist, whose moves fire on the parent's measured symptoms (from the store)."""
        from arbor.agents.specialists.serving_heuristic import HeuristicServingSpecialist

        def symptoms_of(node):
            ms = [m for m in store.measurements(node.id) if m.status == "ok"] if store is not None else []
            return self.symptoms(ms[-1]) if ms else None

        return HeuristicServingSpecialist(self.moves(skills), seed=seed, symptoms_of=symptoms_of,
                                          config_problem=self.config_problem)

    def llm_specialist(self, runtime, skills: list[SkillSpec], summary: str, max_children: int):
        from arbor.agents.specialists.serving_llm import Knob, LLMServingSpecialist

        knobs = [Knob(name=name, kind=str(k["kind"] or "str"), choices=tuple(k["choices"]) if k["choices"] else None,
                      min=k["min"], max=k["max"], description=k["description"] or "")
                 for name, k in self.knob_space().items()]

        def symptoms_of(node):
            m = runtime.last_measurement(node.id)
            return self.symptoms(m) if m is not None else None

        return LLMServingSpecialist(None, runtime, skills, summary, knobs=knobs, device=getattr(self.t, "device", None),
                                    canonical=self.canonical, parse=self.parse_artifact,
                                    config_problem=self.config_problem, symptoms_of=symptoms_of,
                                    max_children=max_children)

    @classmethod
    def objective_summary(cls, store, root_id: int | None, best) -> dict | None:
        return serving_summary(store, root_id, best)


def serving_summary(store, root_id: int | None, best) -> dict | None:
    """Baseline and best fronts for the campaign summary, from the Critic's accepted verdicts
    (the best node's verdict carries the baseline front measured interleaved with it)."""
    def accepted_stats(node_id: int) -> dict | None:
        for v in reversed(store.verdicts(node_id)):
            if v.decision == "accept":
                return next((g["stats"] for g in v.gates if isinstance(g, dict) and "stats" in g), None)
        return None

    node_id = best.id if best is not None else root_id
    stats = accepted_stats(node_id) if node_id is not None else None
    if not stats or "front_baseline" not in stats:
        return None
    is_root = best is None or best.parent_id is None
    keys = ("metric", "objective_baseline", "objective_candidate", "hv_baseline", "hv_candidate",
            "pareto_improvement_pct", "reference_point", "front_baseline", "front_candidate",
            "levels_baseline", "levels_candidate", "ratio", "ci_low", "ci_high", "accuracy")
    out = {k: stats.get(k) for k in keys}
    out["best_is_baseline"] = is_root
    out["best_config"] = parse_config(store.get_artifact(best.artifact_sha)) if best is not None else None
    return out
