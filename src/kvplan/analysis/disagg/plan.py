"""A minimal disaggregated search: xPyD fleets through memory, zero-load floors, simulation.

    enumerate   prefill GPU x decode GPU x (tp_p, tp_d: tp_d a multiple of tp_p) x x x y
    memory      each pool's capacity plan holds one max_model_len request (exact)
    floors      safe prunes, load only adds to them: every request's zero-load TTFT
                (prefill alone + transfer + one decode step) and TPOT (one request decoding
                alone) at the SLO's percentile; the prefill pool's token rate
                (x x budget / full-budget step time) >= the workload's prompt-token rate
    simulate    cheapest first ($/h from the price table, else GPUs), until one passes

`kvplan plan --disagg` runs it beside the aggregated plan. Missing against the aggregated
planner (docs/disaggregation.md, "Planner"): one shared space and ranking, margin/noise
bands, levers and what-ifs, the parallel executor, several links per search.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.analysis.disagg.serving import PoolRun, plan_pool, simulate_disagg_serving
from kvplan.analysis.plan.judge import Verdict, judge, latencies
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment, vllm_serve_argv
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.links import LinkSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.prices import PriceTable
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import Slo

NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggCandidate:
    """One xPyD fleet and the stage that kept or dropped it."""

    deployment: DisaggDeployment
    stage: str
    """'memory', 'floor', 'prefill-rate' (dropped there), 'simulated', or 'not simulated'."""
    reason: str
    usd_per_hour: float | None = None
    verdict: Verdict | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is not None and self.verdict.ok


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggPlan:
    """Every candidate's record and the cheapest that met the SLO (or None)."""

    candidates: tuple[DisaggCandidate, ...]
    best: DisaggCandidate | None


def enumerate_disagg(model: ModelSpec, gpus: Sequence[HardwareSpec], engine: EngineConfig,
                     link: LinkSpec, *, tps: Sequence[int] = (1, 2, 4, 8),
                     max_instances: int = 4) -> list[DisaggDeployment]:
    """Every valid xPyD fleet in the grid (invalid pairs, e.g. a node link too small, out)."""
    out = []
    counts = range(1, max_instances + 1)
    for gp, gd, tp_p, tp_d, x, y in itertools.product(gpus, gpus, tps, tps, counts, counts):
        if tp_d % tp_p:
            continue
        try:
            pools = [Deployment(model=model, gpu=g, replicas=n,
                                engine=replace(engine, tensor_parallel_size=tp))
                     for g, tp, n in ((gp, tp_p, x), (gd, tp_d, y))]
            out.append(DisaggDeployment(prefill=pools[0], decode=pools[1], link=link))
        except KvplanError:
            continue
    return out


def search_disagg(fleets: Sequence[DisaggDeployment], work: Workload, slo: Slo, *,
                  prices: PriceTable | None = None, max_simulations: int = 8) -> DisaggPlan:
    """Funnel ``fleets`` (see the module docstring); the cheapest passing one is ``best``."""
    kept, dropped = [], []
    plans: dict[tuple[str, str, int], PoolRun | None] = {}
    for dd in fleets:
        why = _memory(dd, plans)
        if why:
            dropped.append(DisaggCandidate(deployment=dd, stage="memory", reason=why))
            continue
        stage, why = _floors(dd, plans, work, slo)
        if why:
            dropped.append(DisaggCandidate(deployment=dd, stage=stage, reason=why))
            continue
        kept.append(dd)
    kept.sort(key=lambda d: (_cost(d, prices) or math.inf, d.total_gpus, d.label))
    done, best = _simulate(kept, work, slo, prices, max_simulations)
    return DisaggPlan(candidates=tuple(dropped + done), best=best)


def _simulate(kept: list[DisaggDeployment], work: Workload, slo: Slo,
              prices: PriceTable | None, budget: int
              ) -> tuple[list[DisaggCandidate], DisaggCandidate | None]:
    out: list[DisaggCandidate] = []
    best = None
    for i, dd in enumerate(kept):
        cost = _cost(dd, prices)
        if best is not None or i >= budget:
            why = "a cheaper fleet passed" if best is not None else "simulation budget spent"
            out.append(DisaggCandidate(deployment=dd, stage="not simulated", reason=why,
                                       usd_per_hour=cost))
            continue
        run = simulate_disagg_serving(dd, work)
        verdict = judge(latencies(run.result.client), slo)
        c = DisaggCandidate(deployment=dd, stage="simulated", usd_per_hour=cost,
                            verdict=verdict,
                            reason=("meets the SLO" if verdict.ok else "misses the SLO")
                            + f"; binding {verdict.binding} (margin {verdict.margin:+.0%})")
        out.append(c)
        if verdict.ok:
            best = c
    return out, best


def _pool(role: str, d: Deployment, plans: dict[tuple[str, str, int], PoolRun | None]
          ) -> PoolRun | None:
    key = (role, d.gpu.id, d.engine.tensor_parallel_size)
    if key not in plans:
        try:
            plans[key] = plan_pool(role, d)
        except KvplanError:
            plans[key] = None
    return plans[key]


def _memory(dd: DisaggDeployment, plans: dict[tuple[str, str, int], PoolRun | None]) -> str:
    for role, d in (("prefill", dd.prefill), ("decode", dd.decode)):
        if _pool(role, d, plans) is None:
            return f"the {role} pool ({d.gpu.id} TP{d.engine.tensor_parallel_size}) cannot " \
                   "hold one max_model_len request"
    return ""


def _floors(dd: DisaggDeployment, plans: dict[tuple[str, str, int], PoolRun | None],
            work: Workload, slo: Slo) -> tuple[str, str]:
    """('floor' or 'prefill-rate', why) when a safe bound already misses; else ('', '')."""
    from kvplan.analysis.disagg.floors import prefill_rate_short, zero_load_miss

    pre, dec = _pool("prefill", dd.prefill, plans), _pool("decode", dd.decode, plans)
    assert pre is not None and dec is not None
    why = zero_load_miss(dd, pre, dec, work, slo)
    if why:
        return "floor", why
    why = prefill_rate_short(dd, pre, work)
    return ("prefill-rate", why) if why else ("", "")


def _cost(dd: DisaggDeployment, prices: PriceTable | None) -> float | None:
    if prices is None:
        return None
    total = 0.0
    for d in (dd.prefill, dd.decode):
        rows = prices.for_gpu(d.gpu.id)
        if not rows:
            return None
        total += min(r.usd_per_gpu_hour for r in rows) * d.total_gpus
    return total


def serve_lines(dd: DisaggDeployment, model_id: str | None = None) -> dict[str, str]:
    """The `vllm serve` line of each role (NixlConnector), a proxy note and a bench line."""
    lines = {}
    for role, d in (("prefill", dd.prefill), ("decode", dd.decode)):
        argv = [*vllm_serve_argv(d, model_id), "--kv-transfer-config", f"'{NIXL}'"]
        if role == "decode":  # simulated without prefix-cache hits on the decode side
            argv = [a if a != "--enable-prefix-caching" else "--no-enable-prefix-caching"
                    for a in argv]
        lines[role] = f"{d.replicas} x: " + " ".join(argv)
    lines["proxy"] = ("vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py "
                      "--prefiller-hosts ... --decoder-hosts ... (round robin both sides)")
    lines["bench"] = f"vllm bench serve --model {model_id or dd.prefill.model.name} " \
                     "--base-url http://PROXY:PORT"
    return lines
