"""One disaggregated serving simulation: each pool's capacity plan and step timer, the link's
transfer cost, the bad-input checks (pool too small, link too slow for the TTFT SLO), run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvplan.analysis.serving import pick_profile, saved_rate, scale_key, scheduler_limits
from kvplan.costs.memory.kv_transfer import TransferCost, group_pages
from kvplan.costs.memory.plan import MemoryPlan, plan_memory
from kvplan.costs.memory.settings import mla_block_size
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import DoesNotFitError, InputError
from kvplan.sim.blocks import kv_shape_from_groups
from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
from kvplan.sim.disagg.result import DisaggResult
from kvplan.sim.scheduler import Limits
from kvplan.specs.deployment import Deployment
from kvplan.specs.disagg import (
    DisaggDeployment,
    kv_transfer_model,
    link_usable,
    pool_flags,
    pool_label,
)
from kvplan.specs.links import LinkSpec, link_catalog
from kvplan.specs.requests.workload import Workload, WorkloadArgs, build_workload
from kvplan.units import fmt_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolRun:
    """One pool as simulated: its deployment, capacity plan and scheduler limits."""

    role: str
    deployment: Deployment
    plan: MemoryPlan
    limits: Limits
    profile: str | Profile | None = None
    """The latency profile its steps are priced with (None: the GPU's bundled one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggRun:
    """A finished disaggregated simulation with what it ran on."""

    deployment: DisaggDeployment
    prefill: PoolRun
    decode: PoolRun
    transfer: TransferCost
    workload: Workload
    result: DisaggResult

    def header(self, args: WorkloadArgs | None = None) -> dict[str, Any]:
        """`vllm bench serve`-style settings plus both pools and the link."""
        d = self.deployment
        rate_p, rate_d = d.side_rates()
        return {
            "backend": "kvplan-sim-disagg", "model_id": d.prefill.model.name,
            "gpu": f"{d.prefill.gpu.id} / {d.decode.gpu.id}",
            "dataset": self.workload.name, "num_prompts": len(self.workload),
            "request_rate": saved_rate(args, self.workload),
            "burstiness": 1.0 if args is None else args.burstiness,
            "seed": 0 if args is None else args.seed, **scale_key(args),
            "max_concurrency": None, "disagg": d.label, "router": d.router,
            "kv_link": d.link.id,
            "kv_link_bytes_per_s_per_gpu": d.link_rate(),
            "kv_link_latency_s": d.link.latency_s,
            "prefill": {**_pool_header(self.prefill), "kv_link_bytes_per_s_per_gpu": rate_p},
            "decode": {**_pool_header(self.decode), "kv_link_bytes_per_s_per_gpu": rate_d},
            "block_size": self.decode.plan.block_size,
            "max_model_len": self.decode.plan.settings.max_model_len,
        }


def _pool_header(p: PoolRun) -> dict[str, Any]:
    d = p.deployment
    return {"gpu": d.gpu.id, "tensor_parallel_size": d.engine.tensor_parallel_size,
            "data_parallel_size": d.engine.data_parallel_size,
            "enable_expert_parallel": d.engine.enable_expert_parallel,
            "instances": d.replicas, "num_gpu_blocks": p.plan.num_blocks,
            "max_num_batched_tokens": p.limits.max_num_batched_tokens,
            "max_num_seqs": p.limits.max_num_seqs,
            "enable_prefix_caching": p.limits.prefix_caching}


def plan_pool(role: str, d: Deployment, profile: str | Profile | None = None) -> PoolRun:
    """The pool's capacity plan (the KV layout vLLM uses with a KV connector,
    ``kv_transfer_model``) and limits; a pool that cannot hold one request says so
    (``profile``: the latency profile its timer prices steps with, None: bundled)."""
    _check_dp_pool(role, d)
    try:
        plan = plan_memory(kv_transfer_model(d.model), d.gpu, d.engine)
    except DoesNotFitError as exc:
        text = pool_flags(str(exc), role)
        raise DoesNotFitError(f"{role} pool ({d.gpu.id}, {pool_label(d)}): "
                              f"{text}", needed_bytes=exc.needed_bytes,
                              available_bytes=exc.available_bytes) from None
    except InputError as exc:
        raise InputError(f"{role} pool ({d.gpu.id}, {pool_label(d)}): "
                         f"{pool_flags(str(exc), role)}") from None
    limits = scheduler_limits(plan.settings, d.engine)
    if role == "decode":  # the decode side reads every prompt block from the link
        limits = Limits(max_num_batched_tokens=limits.max_num_batched_tokens,
                        max_num_seqs=limits.max_num_seqs, chunked_prefill=True,
                        prefix_caching=False,
                        long_prefill_token_threshold=limits.long_prefill_token_threshold)
    return PoolRun(role=role, deployment=d, plan=plan, limits=limits, profile=profile)


def _check_dp_pool(role: str, d: Deployment) -> None:
    """A DP pool needs an MoE model: vLLM runs a dense model's DP ranks as independent
    engines (analysis/dp_serving.check_dp_model), which here are more instances."""
    dp = d.engine.data_parallel_size
    if dp > 1 and d.model.moe is None:
        n = d.replicas * dp
        raise InputError(
            f"--{role}-dp {dp}: {d.model.name} is dense, and vLLM runs its DP ranks as "
            f"independent engines, not in lockstep; give {n} {role} instances of DP 1 "
            f"instead (--{role}-instances {n}, --{role}-dp 1)")


def transfer_cost(dd: DisaggDeployment, decode_plan: MemoryPlan,
                  link: LinkSpec | None = None) -> TransferCost:
    """The transfer arithmetic between the two pools over ``link`` (default: the fleet's)."""
    link = link or dd.link
    rate_p, rate_d = dd.side_rates(link)
    model = dd.decode.model
    return TransferCost(groups=group_pages(decode_plan.groups, model.attention_chunk_size,
                                           model.chunked_local_layers),
                        prefill_tp=dd.prefill.engine.tensor_parallel_size,
                        decode_tp=dd.decode.engine.tensor_parallel_size,
                        bytes_per_s_per_gpu=rate_p, decode_bytes_per_s_per_gpu=rate_d,
                        latency_s=link.latency_s)


def link_slo_note(dd: DisaggDeployment, decode_plan: MemoryPlan, ttft_ms: float,
                  tokens: int) -> str | None:
    """Why a ``tokens``-token prompt cannot meet a TTFT goodput of ``ttft_ms`` on the fleet's
    link alone (its KV's wire time is longer before any compute), naming the links and the
    longest prompt that would; None when the link is fast enough. A benchmark with such a
    goodput still runs (vLLM's does): those requests just do not count as good."""
    import numpy as np

    cost = transfer_cost(dd, decode_plan)
    nbytes = int(cost.link_bytes(np.array([tokens]))[0])
    took_ms = 1000 * cost.transfer_s(nbytes)
    if took_ms <= ttft_ms:
        return None
    gpus = (dd.prefill.gpu.id, dd.decode.gpu.id)
    fits = [x.id for x in link_catalog() if link_usable(x, gpus, dd.total_gpus)
            and 1000 * transfer_cost(dd, decode_plan, x).transfer_s(nbytes) <= ttft_ms]
    block = decode_plan.block_size  # whole pages move: round down to a page
    longest = _longest_in_time(cost, ttft_ms / 1000, block, tokens)
    shorter = (f"or prompts of at most {longest:,} tokens" if longest > 0 else
               f"no prompt fits: one {block}-token page and the link's "
               f"{1e6 * cost.latency_s:g} us latency take longer")
    return (f"--kv-link {dd.link.id} moves the longest prompt's KV ({tokens:,} tokens, "
            f"{fmt_bytes(nbytes)}) in {took_ms:,.1f} ms, over the TTFT goodput of "
            f"{ttft_ms:g} ms before any compute: such requests cannot count as good; links "
            f"that fit: {', '.join(fits) or 'none'}; {shorter}")


def _longest_in_time(cost: TransferCost, limit_s: float, block: int, tokens: int) -> int:
    """The longest prompt of whole ``block``-token pages, below ``tokens``, whose KV moves
    within ``limit_s`` (0: none): bytes grow with the pages, not always in proportion
    (Llama 4's chunked layers stop growing past their chunk), so the pages are searched."""
    import numpy as np

    lo, hi = 0, tokens // block
    while lo < hi:
        mid = (lo + hi + 1) // 2
        took = cost.transfer_s(float(cost.link_bytes(np.array([mid * block]))[0]))
        lo, hi = (mid, hi) if took <= limit_s else (lo, mid - 1)
    return lo * block


def block_mismatch(pre: PoolRun, dec: PoolRun) -> str:
    """Why the pools cannot pair, or '': both pools page the KV alike. vLLM forces an MLA
    backend's block on some GPUs (costs/memory/settings.mla_block_size), so --block-size
    can differ per pool: name the one --block-size both keep (a multiple of each block), or
    say that none does (FlashMLA's 64 on Hopper beside CUTLASS MLA's 128 on Blackwell)."""
    bp, bd = pre.plan.block_size, dec.plan.block_size
    if bp == bd:
        return ""
    why = (f"the prefill pool's block size {bp} ({pre.deployment.gpu.id}) differs from the "
           f"decode pool's {bd} ({dec.deployment.gpu.id}): vLLM forces its MLA backend's "
           f"block size on some GPUs; ")
    both = math.lcm(bp, bd)
    if all(mla_block_size(r.deployment.model, r.deployment.gpu, both) == both
           for r in (pre, dec)):
        return why + f"give --block-size {both}, which both pools keep"
    return why + ("no --block-size makes them page alike; pair GPUs whose MLA backends use "
                  "one block size")


def simulate_disagg_serving(dd: DisaggDeployment,
                            workload: Workload | WorkloadArgs | None = None, *,
                            profile: str | Profile | None = None,
                            ttft_slo_ms: float | None = None) -> DisaggRun:
    """Simulate ``workload`` on the disaggregated fleet ``dd``."""
    pre, dec = plan_pool("prefill", dd.prefill, profile), plan_pool("decode", dd.decode, profile)
    why = block_mismatch(pre, dec)
    if why:
        raise InputError(why)
    work = workload if isinstance(workload, Workload) else build_workload(
        workload or WorkloadArgs())
    if ttft_slo_ms is not None and len(work.prompt_tokens):
        why_not = link_slo_note(dd, dec.plan, ttft_slo_ms, int(work.prompt_tokens.max()))
        if why_not:
            from kvplan.notes import note

            note(why_not)
    cost = transfer_cost(dd, dec.plan)
    pre_sim, dec_sim = pool_sims(pre, dec, profile)
    result = simulate_disagg(work, prefill=pre_sim, decode=dec_sim, transfer=cost,
                             router=dd.router)
    return DisaggRun(deployment=dd, prefill=pre, decode=dec, transfer=cost, workload=work,
                     result=result)


def pool_timer(p: PoolRun, profile: str | Profile | None = None) -> StepCostModel:
    """The pool's step timer (its GPU's bundled profile unless one is given, here or as the
    pool's own ``profile``)."""
    d = p.deployment
    profile = p.profile if profile is None else profile
    prof = profile if isinstance(profile, Profile) else pick_profile(d.model, d.gpu, d.engine,
                                                                     profile)
    try:
        return StepCostModel(d.model, d.gpu, d.engine, prof)
    except InputError as exc:  # a step rule (DBO, kernel tables) refusing this pool's engine
        raise InputError(f"{p.role} pool ({d.gpu.id}, {pool_label(d)}): "
                         f"{pool_flags(str(exc), p.role)}") from None


def pool_sims(pre: PoolRun, dec: PoolRun,
               profile: str | Profile | None) -> tuple[PoolSim, PoolSim]:
    """Both pools' simulation inputs; one timer where both pools price steps alike (the
    same model, GPU and engine flags: pool_timer's inputs)."""
    a, b = pre.deployment, dec.deployment
    timer = pool_timer(pre, profile)
    same = (a.model, a.gpu, a.engine) == (b.model, b.gpu, b.engine)
    return _pool_sim(pre, timer), _pool_sim(dec, timer if same else pool_timer(dec, profile))


def _pool_sim(p: PoolRun, timer: StepCostModel) -> PoolSim:
    """One pool's simulation inputs; a DP instance's ranks each hold ``num_blocks``."""
    d = p.deployment
    return PoolSim(instances=d.replicas, timer=timer,
                   num_blocks=p.plan.num_blocks,
                   shape=kv_shape_from_groups(p.plan.groups, p.plan.block_size),
                   limits=p.limits, max_model_len=p.plan.settings.max_model_len,
                   dp=d.engine.data_parallel_size)
