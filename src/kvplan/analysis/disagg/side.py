"""`kvplan plan --disagg` from its flags: the xPyD fleets of the plan's GPUs, TP degrees, links,
workload, SLO and prices, ranked with the plan's aggregated candidates. The CLI and the web
Plan page both call it (their flags are the same dict of `kvplan plan` arguments)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.disagg.candidates import JointSide
    from kvplan.analysis.plan.args import FlagParser

MAX_INSTANCES = 4


def check_disagg_args(args: dict[str, Any]) -> None:
    """--kv-link needs --disagg; --disagg compares at one offered load."""
    if args.get("kv_link") is not None and not args.get("disagg"):
        raise InputError("--kv-link is the link of --disagg's fleets; give --disagg too")
    rate = args["request_rate"]
    no_rate = rate is None or math.isinf(rate)  # inf: every request at once, no offered load
    if args.get("disagg") and no_rate and args["trace"] is None \
            and args["dataset"] in (None, "random"):
        raise InputError(_ONE_LOAD)
    if args.get("disagg") and no_rate:  # a trace's own times: its requests may span 0 s
        _check_trace_span(args)


def _check_trace_span(args: dict[str, Any]) -> None:
    """Refuse, before any plan runs (and before its capacity-mode note), a trace whose
    requests taken all arrive at one time: no offered load to compare fleets at."""
    from kvplan.analysis.plan.args import workload_from
    from kvplan.analysis.plan.traffic import plan_traffic

    traffic = plan_traffic(workload_from(args), quiet=True)
    if traffic.target is None:
        raise InputError(f"{_ONE_LOAD}; the {traffic.requests} requests of {traffic.name} "
                         f"all arrive at t = 0")


_ONE_LOAD = ("--disagg compares fleets at one offered load: give --request-rate (fleet req/s, "
             "finite) or a trace with arrival times")


def disagg_side(args: dict[str, Any], plan: Any,
                parse_flag: FlagParser | None = None) -> JointSide:
    """xPyD fleets on the plan's GPUs, TP degrees, links, workload, SLO and prices, ranked
    with the plan's aggregated candidates (kvplan.analysis.disagg.joint). ``args["model"]``
    is a name or a resolved spec (then ``args["model_id"]`` names it in the serve lines).
    ``parse_flag``: the flag parser the plan's space was read with (plan.args.FlagParser), so
    a list the plan accepted (``--max-num-batched-tokens 8K``) is read the same here."""
    from kvplan.analysis.disagg.answer import DEFAULT_LINK
    from kvplan.analysis.disagg.candidates import JointSide
    from kvplan.analysis.disagg.joint import plan_joint
    from kvplan.analysis.disagg.joint_levers import disagg_levers
    from kvplan.analysis.plan.args import plan_kwargs, slo_from, workload_from
    from kvplan.analysis.plan.parallel.space import EP_WITH_DP, default_dp_sizes
    from kvplan.analysis.plan.space import valid_tp_degrees
    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import gpu_catalog, load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.model import ModelSpec

    space = plan_kwargs(args) if parse_flag is None else plan_kwargs(args, parse_flag)
    traffic = plan_traffic(workload_from(args))
    work = traffic.target  # the requests the plan verified on
    if work is None:  # every request at t = 0: a dataset without arrivals and no rate
        raise InputError(f"{_ONE_LOAD}; the {traffic.requests} requests of {traffic.name} "
                         f"all arrive at t = 0")
    names = space["gpus"]
    gpus = ([load_gpu(n) for n in names] if names is not None else
            [g for g in gpu_catalog().values() if plan.prices.for_gpu(g.id)])
    model = args["model"] if isinstance(args["model"], ModelSpec) else load_model(args["model"])
    model_id = args.get("model_id") or args["model"]
    tps = space["tensor_parallel_sizes"] or valid_tp_degrees(model)
    dps = space["data_parallel_sizes"] or default_dp_sizes(model)
    eps = space["expert_parallel"] or (EP_WITH_DP,)
    links = [load_link(x.strip()) for x in (args["kv_link"] or DEFAULT_LINK).split(",")]
    slo = slo_from(args)
    joint = plan_joint(plan, model, work, slo, gpus=gpus, tps=tps, links=links,
                       max_instances=MAX_INSTANCES, search=args["search"],
                       workers=args["workers"],
                       async_scheduling=bool(args.get("async_scheduling")),
                       dps=tuple(dps), eps=tuple(eps),
                       limits=(args.get("max_gpus"), args.get("max_cost_per_hour")),
                       **_engine_space(args, space))
    best = joint.best_disagg
    levers = () if best is None else disagg_levers(best, work, slo, plan.prices,
                                                       args["workers"], space["profile"],
                                                       space["slo_margin"])
    bench = plan.bench_command or f"vllm bench serve --model {model_id}"
    return JointSide(joint=joint, levers=levers, slo=slo, model_id=model_id,
                     bench=f"{bench} --base-url http://PROXY:PORT")


def _engine_space(args: dict[str, Any], space: dict[str, Any]) -> dict[str, Any]:
    """plan_joint's engine, pricing and judging options from the plan's: as the aggregated
    candidates were built (KV cache dtypes, weight formats, the other engine lists, memory
    share, max_model_len), priced (--profile) and judged (--slo-margin)."""
    return {"kv_cache_dtypes": tuple(space["kv_cache_dtypes"] or ("auto",)),
            "quantizations": tuple(space["quantizations"] or (None,)),
            "engine_lists": _engine_lists(args, space),
            "gpu_memory_utilization": space["gpu_memory_utilization"],
            "max_model_len": space["max_model_len"], "profile": space["profile"],
            "margin": space["slo_margin"]}


def _engine_lists(args: dict[str, Any], space: dict[str, Any]) -> dict[str, list[Any]]:
    """The plan's engine-flag lists the pools take too, as the aggregated candidates do:
    --block-size, --enable-prefix-caching (the prefill pool's; the decode pool reads every
    prompt block from the link) and --max-num-seqs; --max-num-batched-tokens only where
    given (its default list is the aggregated funnel's search, the pools keep vLLM's
    default budget)."""
    out = {"block_size": space["block_sizes"], "enable_prefix_caching": space["prefix_caching"],
           "max_num_seqs": space["max_num_seqs"]}
    if args.get("max_num_batched_tokens") is not None:
        out["max_num_batched_tokens"] = space["max_num_batched_tokens"]
    return {k: list(v) for k, v in out.items() if v}
