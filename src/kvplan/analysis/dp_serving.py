"""One data-parallel serving simulation: the per-rank capacity plan and step timer, the ranks
in lockstep (``kvplan.sim.dp``), and the per-rank facts the CLI and JSON print."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.costs.memory.plan import MemoryPlan
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import InputError
from kvplan.sim.dp.lockstep import RankSim, simulate_dp
from kvplan.sim.dp.merge import DpResult
from kvplan.sim.scheduler import Limits
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig


def check_dp_model(model: ModelSpec, engine: EngineConfig) -> None:
    """vLLM 0.11 runs a dense model's DP ranks as independent DP=1 engines (core.py
    run_engine_core: "Non-MoE DP ranks are completely independent"); kvplan's lockstep
    fleet is the MoE engine's, so a dense DP deployment is refused with what to run. Under
    PP each rank keeps a queue of pp batches in flight (core.py step_with_batch_queue, the
    stages' MoE collectives pairing per stage); the lockstep fleet steps one batch per rank,
    so DP x PP is refused rather than priced as pp = 1 at the whole pipeline's latency."""
    if model.moe is None:
        raise InputError(
            f"{model.name} is dense: vLLM runs its {engine.data_parallel_size} DP ranks as "
            f"independent engines, not in lockstep; simulate one rank with "
            f"--data-parallel-size 1 at 1/{engine.data_parallel_size} of the request rate")
    if engine.pipeline_parallel_size > 1:
        raise InputError(
            f"--data-parallel-size {engine.data_parallel_size} with --pipeline-parallel-size "
            f"{engine.pipeline_parallel_size} is not simulated: vLLM keeps up to "
            f"{engine.pipeline_parallel_size} batches in flight on each DP rank, each stage's "
            f"MoE layers in lockstep across the ranks, and kvplan's lockstep fleet runs one "
            f"batch at a time; give -pp 1 (more -tp) or -dp 1")


def dp_rank_sim(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig, plan: MemoryPlan,
                limits: Limits, profile: Profile) -> RankSim:
    """What each rank runs with: the DP / EP engine's step timer (experts at dp x T tokens,
    the exchange), the rank's own KV pool and budgets. The planner can call it per
    candidate and hand it to ``simulate_dp``."""
    from kvplan.sim.blocks import kv_shape_from_groups

    check_dp_model(model, engine)
    return RankSim(ranks=engine.data_parallel_size,
                   timer=StepCostModel(model, hw, engine, profile),
                   num_blocks=plan.num_blocks,
                   shape=kv_shape_from_groups(plan.groups, plan.block_size),
                   limits=limits, max_model_len=plan.settings.max_model_len)


def run_dp(work: Workload, sim: RankSim,
           progress: Callable[[int, int], None] | None = None) -> DpResult:
    """The lockstep simulation, reporting ``progress(done, total)`` as it goes."""
    return simulate_dp(work, sim, progress=progress)


def dp_header(dp: DpResult, engine: EngineConfig, plan: MemoryPlan) -> dict[str, Any]:
    """The DP keys of the run's header: the layout and, per rank, its requests and KV."""
    ranks = []
    for k, r in enumerate(dp.ranks):
        ranks.append({
            "rank": k, "requests": int((dp.rank_of == k).sum()),
            "num_gpu_blocks": plan.num_blocks, "peak_kv_blocks": r.peak_kv_blocks,
            "peak_kv_usage": r.peak_kv_blocks / r.usable_blocks,
            "dummy_steps": dp.dummy_steps_per_rank[k]})
    return {"data_parallel_size": engine.data_parallel_size,
            "enable_expert_parallel": engine.enable_expert_parallel,
            "dp_lockstep_steps": len(dp.padded_tokens), "dp_ranks": ranks}
