"""`kvplan plan --disagg`: the minimal disaggregated search beside the aggregated plan."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from kvplan.analysis.disagg.plan import DisaggCandidate, DisaggPlan

MAX_INSTANCES = 4
MAX_SIMULATIONS = 8


def check_disagg_args(args: dict[str, Any]) -> None:
    """--kv-link needs --disagg; --disagg compares at one offered load."""
    if args.get("kv_link") is not None and not args.get("disagg"):
        raise InputError("--kv-link is the link of --disagg's fleets; give --disagg too")
    if args.get("disagg") and args["request_rate"] is None and args["trace"] is None \
            and args["dataset"] in (None, "random"):
        raise InputError("--disagg compares fleets at one offered load: give --request-rate "
                         "(fleet req/s) or a trace")


def disagg_side(args: dict[str, Any], plan: Any) -> DisaggPlan:
    """Search xPyD fleets on the plan's GPUs, TP degrees, workload, SLO and prices."""
    import numpy as np

    from kvplan.analysis.disagg.plan import enumerate_disagg, search_disagg
    from kvplan.analysis.plan.args import slo_from, space_options, workload_from
    from kvplan.analysis.plan.space import valid_tp_degrees
    from kvplan.cli.cmd_simulate_disagg import DEFAULT_LINK
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import gpu_catalog, load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.requests.workload import build_workload
    from kvplan.specs.serving import EngineConfig

    model = load_model(args["model"])
    space = space_options(args)
    work = build_workload(workload_from(args))
    names = space["gpus"]
    gpus = ([load_gpu(n) for n in names] if names is not None else
            [g for g in gpu_catalog().values() if plan.prices.for_gpu(g.id)])
    tps = space["tensor_parallel_sizes"] or valid_tp_degrees(model)
    longest = int(np.max(work.prompt_tokens + work.output_tokens))
    engine = EngineConfig(max_model_len=min(longest, model.max_position_embeddings))
    fleets = enumerate_disagg(model, gpus, engine, load_link(args["kv_link"] or DEFAULT_LINK),
                              tps=tps, max_instances=MAX_INSTANCES)
    return search_disagg(fleets, work, slo_from(args), prices=plan.prices,
                         max_simulations=MAX_SIMULATIONS)


def _fleet_text(c: DisaggCandidate) -> str:
    d = c.deployment
    return (f"{d.label}: prefill {d.prefill.replicas} x {d.prefill.gpu.id} TP"
            f"{d.prefill.engine.tensor_parallel_size}, decode {d.decode.replicas} x "
            f"{d.decode.gpu.id} TP{d.decode.engine.tensor_parallel_size}, over {d.link.id}")


def versus(side: DisaggPlan, plan: Any) -> str:
    """One line: which wins, by how much per hour (or why there is no comparison)."""
    best, agg = side.best, plan.winner
    agg_cost = None if agg is None else agg.usd_per_hour
    if best is None or best.usd_per_hour is None:
        return "no disaggregated fleet met the SLO in the searched grid"
    if agg_cost is None:
        return f"only disaggregated serving met the SLO (${best.usd_per_hour:,.2f}/h)"
    diff = best.usd_per_hour - agg_cost
    if abs(diff) < 0.005:
        return f"the same cost either way: ${agg_cost:,.2f}/h"
    who = "disaggregated" if diff < 0 else "aggregated"
    return (f"{who} serving is cheaper: ${best.usd_per_hour:,.2f}/h disaggregated vs "
            f"${agg_cost:,.2f}/h aggregated ({abs(diff):,.2f} $/h apart)")


def render_side(side: DisaggPlan, plan: Any, out: Console) -> None:
    """The disaggregated search as text: the best fleet, its serve lines, every drop."""
    from kvplan.analysis.disagg.plan import serve_lines

    out.print("\n[bold]Disaggregated prefill/decode (kvplan plan --disagg)[/bold]")
    if side.best is not None:
        out.print(f"best: {_fleet_text(side.best)}; {side.best.reason}")
        for role, line in serve_lines(side.best.deployment).items():
            out.print(f"  {role}: {line}", soft_wrap=True)
    out.print(versus(side, plan))
    stages = Counter(c.stage for c in side.candidates)
    out.print("candidates: " + ", ".join(f"{n} {s}" for s, n in sorted(stages.items())))


def side_json(side: DisaggPlan, plan: Any) -> dict[str, Any]:
    """The `disaggregated` key of `kvplan plan --disagg --json`."""
    from kvplan.analysis.disagg.plan import serve_lines

    def one(c: DisaggCandidate) -> dict[str, Any]:
        d = c.deployment
        return {"fleet": d.label, "kv_link": d.link.id, "stage": c.stage, "reason": c.reason,
                "usd_per_hour": c.usd_per_hour, "gpus": d.total_gpus,
                "prefill": {"gpu": d.prefill.gpu.id, "instances": d.prefill.replicas,
                            "tensor_parallel_size": d.prefill.engine.tensor_parallel_size},
                "decode": {"gpu": d.decode.gpu.id, "instances": d.decode.replicas,
                           "tensor_parallel_size": d.decode.engine.tensor_parallel_size},
                "achieved": None if c.verdict is None else dict(c.verdict.achieved)}

    best = side.best
    return {"best": None if best is None else one(best),
            "serve": None if best is None else serve_lines(best.deployment),
            "versus_aggregated": versus(side, plan),
            "candidates": [one(c) for c in side.candidates]}
