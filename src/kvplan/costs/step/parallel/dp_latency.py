"""Static-batch latency of a data-parallel deployment: each DP rank runs its share of the
batch through its own engine (``kvplan.costs.step.parallel.ep_step`` prices the step)::

    batch per rank = ceil(B / dp)        (the fullest rank sets TTFT, TPOT and E2E)
    fleet output throughput = B x O / E2E
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.costs.step.latency import LatencyResult, RequestShape, rank_shape, request_latency
from kvplan.costs.step.profile import Profile
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetLatency:
    """The fleet's answer (shape = the whole batch) and the per-rank shape it stands on."""

    result: LatencyResult
    rank_shape: RequestShape


def fleet_latency(model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                  shape: RequestShape, profile: Profile,
                  resolved: ResolvedDeployment | None = None) -> FleetLatency:
    """Latency of ``shape`` spread over the DP ranks (request_latency spreads it) and the
    fullest rank's shape."""
    r = request_latency(model, hardware, engine, shape, profile, resolved=resolved)
    return FleetLatency(result=r, rank_shape=rank_shape(shape, engine.data_parallel_size))


def parallel_latency_json(model: ModelSpec, engine: EngineConfig,
                          rank: RequestShape) -> dict[str, Any]:
    """The ``parallel`` object of ``latency --json`` (DP / EP runs only); the imbalance is
    1 where EP is not in effect (a dense model, or one GPU)."""
    from kvplan.costs.step.parallel.ep_comm import DEFAULT_IMBALANCE

    e = engine
    ep_on = (model.moe is not None and e.enable_expert_parallel
             and e.tensor_parallel_size * e.data_parallel_size > 1)
    given = DEFAULT_IMBALANCE if e.expert_imbalance is None else e.expert_imbalance
    return {"data_parallel_size": e.data_parallel_size, "enable_expert_parallel": ep_on,
            "batch_per_rank": rank.batch,
            "all2all_backend": e.all2all_backend if model.moe is not None else None,
            "expert_imbalance": given if ep_on else 1.0}


def ep_no_effect(model: ModelSpec, engine: EngineConfig) -> str | None:
    """The warning vLLM's silence deserves: --enable-expert-parallel on a dense model."""
    if engine.enable_expert_parallel and model.moe is None:
        return (f"warning: --enable-expert-parallel has no effect on {model.name}, a dense "
                "model (vLLM applies it to MoE layers only)")
    return None


def check_sweep_plain(engine: EngineConfig) -> None:
    """``latency --sweep`` prices TP deployments only (InputError under DP / EP)."""
    if engine.data_parallel_size > 1 or engine.enable_expert_parallel:
        from kvplan.errors import InputError

        raise InputError("--sweep prices TP deployments only; drop --data-parallel-size and "
                         "--enable-expert-parallel, or run one latency per setting")


def note_waves(hw: HardwareSpec, engine: EngineConfig, rank_batch: int) -> None:
    """A note where vLLM's default --max-num-seqs would not run the batch at once: latency
    prices all of it in one batch (a static batch has no flag for the limit)."""
    from kvplan.costs.memory.vllm_defaults import default_max_num_seqs
    from kvplan.notes import note

    seqs = default_max_num_seqs(hw, engine.max_num_batched_tokens)
    if rank_batch > seqs:
        note("a batch of %d on each engine is above vLLM's default --max-num-seqs on %s (%d):"
             " vLLM would run at most %d at a time and queue the rest; this answer prices all"
             " %d in one batch ('kvplan simulate --max-num-seqs' models the queue)",
             rank_batch, hw.id, seqs, seqs, rank_batch)
