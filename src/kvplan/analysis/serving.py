"""One serving simulation from names and flags: capacity plan + step timer + workload -> result."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.costs.memory.plan import MemoryPlan, Settings, plan_resolved
from kvplan.costs.memory.resolved import ResolvedDeployment, resolve_deployment
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import InputError
from kvplan.sim.result import SimulationResult

if TYPE_CHECKING:
    from kvplan.sim.dp.merge import DpResult
from kvplan.sim.scheduler import Limits
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec, load_gpu
from kvplan.specs.model import ModelSpec
from kvplan.specs.requests.workload import Workload, WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRun:
    """A finished simulation with what it ran on."""

    model: ModelSpec
    hardware: HardwareSpec
    engine: EngineConfig
    plan: MemoryPlan
    limits: Limits
    workload: Workload
    result: SimulationResult
    dp: DpResult | None = None
    """A data-parallel run: each rank's result (``result`` is the fleet's)."""
    args: WorkloadArgs | None = None
    """The `vllm bench serve` arguments ``workload`` was drawn from (None: a built Workload)."""

    def header(self, args: WorkloadArgs | None = None) -> dict[str, Any]:
        """The run's settings, in the keys `vllm bench serve --save-result` uses where it can;
        ``args``: the arguments the workload was drawn from (default: the run's own)."""
        args = self.args if args is None else args
        extra: dict[str, Any] = {"async_scheduling": True} if self.engine.async_scheduling else {}
        if self.engine.quantization:
            extra["quantization"] = self.engine.quantization
        if self.dp is not None:
            from kvplan.analysis.dp_serving import dp_header

            extra |= dp_header(self.dp, self.engine, self.plan)
        return {
            "backend": "kvplan-sim", "model_id": self.model.name, "gpu": self.hardware.id,
            "dataset": self.workload.name, "num_prompts": len(self.workload),
            "request_rate": saved_rate(args, self.workload),
            "burstiness": 1.0 if args is None else args.burstiness,
            "seed": 0 if args is None else args.seed,  # vLLM's file lacks it: calibrate's
            "max_concurrency": self.workload.closed_loop_concurrency, **scale_key(args),
            "max_num_batched_tokens": self.limits.max_num_batched_tokens,
            "max_num_seqs": self.limits.max_num_seqs, "block_size": self.plan.block_size,
            "max_model_len": self.plan.settings.max_model_len,
            # the flags `kvplan calibrate` replays the run with (vLLM's file has none of them)
            "tensor_parallel_size": self.engine.tensor_parallel_size,
            "pipeline_parallel_size": self.engine.pipeline_parallel_size,
            "dtype": self.engine.dtype, "kv_cache_dtype": self.engine.kv_cache_dtype, **extra,
        }


def saved_rate(args: WorkloadArgs | None, w: Workload) -> str | float:
    """``request_rate`` as a result file writes it: the rate drawn at, ``"inf"`` (every
    request at t=0), or ``"trace"``: a trace on its own arrival times has no rate to write (a
    closed loop still waits for each trace time, sim.frontend, so it is timed too)."""
    rate = None if args is None else args.request_rate
    if rate is None and bool(np.any(np.asarray(w.arrival_s) > 0)):
        return "trace"
    return "inf" if rate is None or math.isinf(rate) else rate


def scale_key(args: WorkloadArgs | None) -> dict[str, float]:
    """``time_scale`` where a trace's own times were rescaled (none at 1: vLLM's keys)."""
    return {"time_scale": args.time_scale} if args is not None and args.time_scale != 1 else {}


def pick_profile(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                 path: str | None = None, *, precision: str | None = None) -> Profile:
    """The latency profile for this GPU and compute precision: from ``path`` or the bundled one."""
    from kvplan.costs.step.profiles import profile_for

    return profile_for(model, hw, engine, path, precision=precision)


def scheduler_limits(settings: Settings, engine: EngineConfig) -> Limits:
    """vLLM's per-step budgets. vLLM 0.11.0 runs chunked prefill whatever the flag says: its
    EngineArgs._set_default_args sets ``enable_chunked_prefill = True`` for every generating
    model ("V1 always uses chunked prefills"), so --no-enable-chunked-prefill changes neither
    the scheduler nor the token budget (the GPU class's default, as ``settings`` has it)."""
    if not engine.enable_chunked_prefill:
        chunked_prefill_forced_on()
    return Limits(max_num_batched_tokens=settings.max_num_batched_tokens,
                  max_num_seqs=settings.max_num_seqs, chunked_prefill=True,
                  prefix_caching=engine.enable_prefix_caching,
                  long_prefill_token_threshold=long_prefill_threshold(engine,
                                                                      settings.max_model_len))


def chunked_prefill_forced_on() -> None:
    """The note --no-enable-chunked-prefill gets (vLLM 0.11.0 ignores the flag)."""
    from kvplan.notes import note

    note("vLLM 0.11 runs chunked prefill whatever --no-enable-chunked-prefill says "
         "(EngineArgs._set_default_args turns it back on for generating models): "
         "simulated with chunked prefill")


def long_prefill_threshold(engine: EngineConfig, max_model_len: int) -> int:
    """vLLM 0.11 SchedulerConfig's long_prefill_token_threshold: the flag (its 4%-of-
    max_model_len default applies only with max_num_partial_prefills > 1, which vLLM 0.11
    does not start with: EngineConfig refuses it)."""
    del max_model_len  # kept for callers: the cap no longer depends on it
    return engine.long_prefill_token_threshold


def simulate_serving(
    model: str | os.PathLike[str] | ModelSpec, gpu: str | os.PathLike[str] | HardwareSpec,
    engine: EngineConfig | None = None, workload: Workload | WorkloadArgs | None = None, *,
    profile: str | os.PathLike[str] | Profile | None = None,
    progress: Callable[[int, int], None] | None = None, kv_layout: ModelSpec | None = None,
) -> ServingRun:
    """Simulate ``workload`` on ``model`` served by vLLM on ``gpu`` with ``engine`` flags.

    ``model``/``gpu`` are catalog names, paths (str or ``pathlib.Path``) or specs;
    ``workload`` is a built Workload or ``WorkloadArgs`` with `vllm bench serve` names
    (default: 1000 random 1024/128 prompts);
    ``kv_layout``: the model as vLLM caches it, where that differs (``kv_transfer_model``:
    the hybrid KV cache manager off), for the KV blocks; steps are priced on ``model``.
    """
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    hw = gpu if isinstance(gpu, HardwareSpec) else load_gpu(gpu)
    d = Deployment(model=spec, gpu=hw, engine=engine or EngineConfig())
    return simulate_resolved(resolve_deployment(d), workload, profile=profile, progress=progress,
                             kv_layout=kv_layout)


def simulate_resolved(r: ResolvedDeployment, workload: Workload | WorkloadArgs | None = None,
                      *, profile: str | os.PathLike[str] | Profile | None = None,
                      progress: Callable[[int, int], None] | None = None,
                      kv_layout: ModelSpec | None = None) -> ServingRun:
    """``simulate_serving`` of one replica of a resolved deployment (no flag resolved again)."""
    from dataclasses import replace

    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.sim.simulator import simulate

    spec, hw, engine = r.model, r.gpu, r.engine
    plan = plan_resolved(r if kv_layout is None else resolve_deployment(
        replace(r.deployment, model=kv_layout)))
    prof = profile if isinstance(profile, Profile) else pick_profile(
        spec, hw, engine, None if profile is None else os.fspath(profile),
        precision=r.compute_precision)
    wargs: WorkloadArgs | None = None  # kept for the run's header (rate, burstiness)
    if isinstance(workload, Workload):
        work = workload
    else:
        wargs = workload or WorkloadArgs()
        work = build_workload(wargs)
    limits = scheduler_limits(plan.settings, engine)
    if engine.data_parallel_size > 1:
        from kvplan.analysis.dp_serving import dp_rank_sim, run_dp

        dp = run_dp(work, dp_rank_sim(spec, hw, engine, plan, limits, prof), progress)
        return ServingRun(model=spec, hardware=hw, engine=engine, plan=plan, limits=limits,
                          workload=work, result=dp.fleet, dp=dp, args=wargs)
    result = simulate(
        work, timer=StepCostModel(spec, hw, engine, prof, resolved=r), num_blocks=plan.num_blocks,
        block_size=plan.block_size, engine=engine,
        kv=kv_shape_from_groups(plan.groups, plan.block_size), limits=limits,
        max_model_len=plan.settings.max_model_len, progress=progress,
    )
    return ServingRun(model=spec, hardware=hw, engine=engine, plan=plan, limits=limits,
                      workload=work, result=result, args=wargs)


def simulate_deployment(d: Deployment, workload: Workload | WorkloadArgs | None = None, *,
                        profile: str | os.PathLike[str] | Profile | None = None,
                        progress: Callable[[int, int], None] | None = None) -> ServingRun:
    """``simulate_serving`` for a one-replica Deployment. A fleet (``replicas`` > 1) is
    refused: one server under all the traffic is not the fleet (kvplan.plan simulates fleets
    behind their router, ``analysis.plan.fleet``)."""
    if d.replicas > 1:
        raise InputError(f"simulate_deployment runs one server, and this Deployment has "
                         f"{d.replicas} replicas ({d.router}): simulate d.with_replicas(1) "
                         "on the share of the traffic one replica gets")
    return simulate_resolved(resolve_deployment(d), workload, profile=profile,
                             progress=progress)
