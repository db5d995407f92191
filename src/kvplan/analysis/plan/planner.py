"""kvplan.plan(): which configuration meets a latency SLO at the lowest cost, and why.

The CLI only renders the Plan this returns (docs/planner.md defines the search and keys).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvplan.analysis.plan.bands import MARGINS
from kvplan.analysis.plan.executor import check_executor, check_workers, pick_executor
from kvplan.analysis.plan.funnel import Limits, Progress, Tally, screen
from kvplan.analysis.plan.jobs import JobContext
from kvplan.analysis.plan.levers import levers
from kvplan.analysis.plan.parallel.space import (
    EP_WITH_DP,
    check_parallel_lists,
    default_dp_sizes,
)
from kvplan.analysis.plan.records import STAGES, Candidate, Lever, Plan, SearchReport
from kvplan.analysis.plan.search import search
from kvplan.analysis.plan.space import (
    DEFAULT_CHUNKS,
    ENGINE_LISTS,
    SearchSpace,
    check_flag_values,
    valid_tp_degrees,
)
from kvplan.analysis.plan.traffic import DEFAULT_SAMPLE, PlanTraffic, plan_traffic
from kvplan.analysis.plan.why.advice import advise
from kvplan.analysis.plan.why.explain import binding, breaking_term
from kvplan.analysis.plan.why.margin import with_bands
from kvplan.analysis.plan.why.verdict import (
    infeasible_why,
    rank,
    replayable,
    seed_warning,
    serve_and_bench,
)
from kvplan.api_check import check_fields, named_fields
from kvplan.errors import InputError
from kvplan.limits import MAX_REPLICAS, USD_PER_HOUR_CAP, check_int, check_number
from kvplan.specs.catalog import load_model, served_name
from kvplan.specs.hardware import HardwareSpec, catalog_id, gpu_catalog, load_gpu
from kvplan.specs.model import ModelSpec
from kvplan.specs.prices import PriceTable, price_table
from kvplan.specs.requests.bounds import MAX_SEED
from kvplan.specs.requests.workload import Workload, WorkloadArgs
from kvplan.specs.slo import Slo
from kvplan.units import counted

SEARCHES = ("funnel", "exhaustive")


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOptions:
    """The search space (vLLM flag names, lists), prices, limits and how to run the search."""

    gpus: tuple[str, ...] | None = None
    tensor_parallel_sizes: tuple[int, ...] | None = None
    pipeline_parallel_sizes: tuple[int, ...] = (1,)
    kv_cache_dtypes: tuple[str, ...] = ("auto",)
    quantizations: tuple[str | None, ...] = (None,)
    max_num_seqs: tuple[int | None, ...] = (None,)
    max_num_batched_tokens: tuple[int | None, ...] = DEFAULT_CHUNKS
    block_sizes: tuple[int, ...] = (16,)
    prefix_caching: tuple[bool, ...] = (True,)
    data_parallel_sizes: tuple[int, ...] | None = None
    """--data-parallel-size list (None: 1, 2, 4, 8 within a node for an MoE model, else 1)."""
    expert_parallel: tuple[bool, ...] | None = None
    """--enable-expert-parallel list (None: on exactly when dp > 1)."""
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    async_scheduling: bool = False
    """vLLM --async-scheduling on every candidate (host work overlaps the GPU's)."""
    replicas: int | None = None
    router: str = "round-robin"
    provider: str | None = None
    prices_file: Path | None = None
    price_overrides: tuple[str, ...] = ()
    max_gpus: int | None = None
    max_cost_per_hour: float | None = None
    search: str = "funnel"
    executor: str = "auto"
    """'auto': local, or Ray for a large plan on a cluster (analysis/plan/executor.py)."""
    workers: int | None = None
    ray_address: str | None = None
    seed: int = 0
    sample_requests: int = DEFAULT_SAMPLE
    profile: str | None = None
    slo_margin: str = "none"
    """'band': require the SLO at the error band's pessimistic edge (docs/planner.md)."""
    explain: bool = True
    today: dt.date | None = None
    model_id: str | None = None
    """The model as the user named it, for the serve and bench lines (default: the name
    ``plan`` was given, or the spec's name)."""


def plan(model: str | os.PathLike[str] | ModelSpec, workload: Workload | WorkloadArgs,
         slo: Slo, *, progress: Progress | None = None, **options: Any) -> Plan:
    """Plan ``model`` (id, config path or spec) for ``workload`` under ``slo`` (PlanOptions)."""
    _check_option_names(options)
    opts = PlanOptions(**{k: _option(k, v) for k, v in options.items()})
    t0 = time.perf_counter()
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    _check_options(opts)
    if opts.model_id is None:
        opts = replace(opts, model_id=spec.name if isinstance(model, ModelSpec)
                       else served_name(os.fspath(model)))
    traffic = plan_traffic(workload, sample=opts.sample_requests, seed=opts.seed)
    _check_replicas(opts, traffic)
    prices = price_table(opts.provider, prices_file=opts.prices_file,
                         overrides=opts.price_overrides, today=opts.today)
    space = _space(spec, opts, prices, traffic)
    ctx = JobContext(unit=traffic.unit, target=traffic.target, slo=slo, profile=opts.profile,
                     slo_margin=opts.slo_margin, rate_rps=traffic.rate_rps)
    lim = Limits(rate_rps=traffic.rate_rps, replicas=opts.replicas, max_gpus=opts.max_gpus,
                 max_cost_per_hour=opts.max_cost_per_hour,
                 mean_output_tokens=traffic.mean_output_tokens,
                 exhaustive=opts.search == "exhaustive",
                 target_requests=0 if traffic.target is None else len(traffic.target))
    tally = Tally()
    cands = screen(spec, space, opts.router, prices, ctx, lim)
    if progress is not None:
        progress("screen", len(cands), len(cands))
    ex = pick_executor(opts.executor, opts.workers, opts.ray_address,
                       sum(c.stage == "screened" for c in cands))
    try:
        cands = search(cands, ex, ctx, prices, lim, tally, progress)
        ranked = rank(cands, lim)
        winner = ranked[0] if ranked else None
        lev: tuple[Lever, ...] = ()
        advice = ""
        if winner is not None and opts.explain:
            lev = levers(winner, space.gpus, prices, ex, ctx, lim, tally)
        elif opts.explain:
            advice = advise(cands, space, prices, ex, ctx, lim, tally)
    finally:
        ex.close()
    cands = [with_bands(_explained(c), slo, traffic.mean_output_tokens) for c in cands]
    winner = next((c for c in cands if winner is not None and c.id == winner.id), None)
    report = _report(opts, ex.workers, ex.name, cands, tally, time.perf_counter() - t0)
    p = _assemble(spec, traffic, slo, prices, opts, space, cands, winner, lev, report, lim,
                  advice)
    if opts.slo_margin == "none":
        return p
    base = plan(spec, workload, slo, **{**options, "slo_margin": "none", "explain": False})
    return replace(p, without_margin=base.winner, infeasible_why=_unmargined(p, base.winner))


def _unmargined(p: Plan, base: Candidate | None) -> str:
    """A refusal under --slo-margin band names the winner the prediction itself allows."""
    if p.winner is not None or base is None:
        return p.infeasible_why
    e = base.deployment.engine
    return (f"{p.infeasible_why}; without the margin {base.id} ({base.deployment.gpu.id} "
            f"TP{e.tensor_parallel_size}, {counted(base.replicas, 'replica')}, "
            f"${base.usd_per_hour or 0.0:.2f}/h) meets the SLO as predicted")


def _check_option_names(options: dict[str, Any]) -> None:
    """An unknown option is an ArgumentTypeError naming it (a KvplanError), with a near name."""
    import difflib
    from dataclasses import fields

    from kvplan.errors import ArgumentTypeError

    known = [f.name for f in fields(PlanOptions)]
    for name in options:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ArgumentTypeError(f"kvplan.plan(): unknown option {name!r}{hint}; the "
                                    f"options are PlanOptions' fields: {', '.join(known)}")


def _option(name: str, v: Any) -> Any:
    """A list as the tuple PlanOptions holds; a path as a str or a path object (the
    ``prices_file`` Path, the ``profile`` str), as the other path arguments take them."""
    if name == "prices_file" and isinstance(v, str):
        return Path(v)
    if name == "profile" and isinstance(v, os.PathLike):
        return os.fspath(v)
    return tuple(v) if isinstance(v, list) else v


def _check_replicas(opts: PlanOptions, traffic: PlanTraffic) -> None:
    """--replicas sizes a fleet for an offered load; capacity mode has none."""
    if opts.replicas is not None and traffic.rate_rps is None:
        raise InputError(f"--replicas {opts.replicas} sizes a fleet for an offered load: give "
                         "--request-rate (fleet req/s) or a timed trace, or drop --replicas "
                         "to get one replica's capacity")


def _check_options(o: PlanOptions) -> None:
    check_fields(o)
    if o.slo_margin not in MARGINS:
        raise InputError(f"--slo-margin {o.slo_margin!r}: choose one of {', '.join(MARGINS)}")
    if o.search not in SEARCHES:
        raise InputError(f"--search {o.search!r}: choose one of {', '.join(SEARCHES)}")
    check_executor(o.executor)
    check_workers(o.workers)
    if o.max_gpus is not None and o.max_gpus < 1:
        raise InputError(f"--max-gpus must be a positive whole number, got {o.max_gpus}")
    if o.replicas is not None:
        check_int("--replicas", o.replicas, 1, MAX_REPLICAS)
    if o.max_cost_per_hour is not None:
        check_number("--max-cost-per-hour", o.max_cost_per_hour, *USD_PER_HOUR_CAP)
    check_int("--seed", o.seed, 0, MAX_SEED)  # numpy's generators take 0 .. 2**32 - 1
    lists = (o.tensor_parallel_sizes or (), o.pipeline_parallel_sizes, o.max_num_seqs,
             o.max_num_batched_tokens, o.block_sizes)
    check_flag_values(dict(zip(ENGINE_LISTS, lists, strict=True)), o.kv_cache_dtypes,
                      o.quantizations, o.router,
                      gpu_memory_utilization=o.gpu_memory_utilization,
                      max_model_len=o.max_model_len)
    if o.profile is not None:  # a bad file is the user's error, not every config's refusal
        from kvplan.costs.step.profiles import load_profiles

        load_profiles(o.profile)


def _space(model: ModelSpec, o: PlanOptions, prices: PriceTable, traffic: PlanTraffic
           ) -> SearchSpace:
    gpus = _gpus(o.gpus, prices)
    tps = o.tensor_parallel_sizes or valid_tp_degrees(model)
    mml = _max_model_len(model, o.max_model_len, traffic.longest_tokens)
    dps = o.data_parallel_sizes or default_dp_sizes(model)
    eps: tuple[bool | None, ...] = o.expert_parallel or (EP_WITH_DP,)
    check_parallel_lists(model, tps, dps, eps)
    return SearchSpace(gpus=gpus, tensor_parallel_sizes=tps, data_parallel_sizes=dps,
                       expert_parallel=eps, default_dp=o.data_parallel_sizes is None,
                       pipeline_parallel_sizes=o.pipeline_parallel_sizes,
                       kv_cache_dtypes=o.kv_cache_dtypes, quantizations=o.quantizations,
                       max_num_seqs=o.max_num_seqs, max_num_batched_tokens=o.max_num_batched_tokens,
                       block_sizes=o.block_sizes, prefix_caching=o.prefix_caching,
                       gpu_memory_utilization=o.gpu_memory_utilization, max_model_len=mml,
                       async_scheduling=o.async_scheduling)


def _max_model_len(model: ModelSpec, given: int | None, longest: int) -> int:
    """--max-model-len as given, else the longest request; refused in one line where a
    request is longer than the model's own context, which no flag raises (vLLM refuses a
    --max-model-len above it: settings.engine_settings), or than --max-model-len."""
    limit = model.context_limit
    if limit is not None and limit < longest:
        raise InputError(f"the longest request in the traffic ({longest} tokens) is longer "
                         f"than {model.name}'s context of {limit} tokens "
                         "(max_position_embeddings, scaled by rope_scaling where vLLM "
                         "scales it), which vLLM cannot serve; trim the traffic")
    if given is not None and given < longest:
        raise InputError(f"--max-model-len {given} is below the longest request in the "
                         f"traffic ({longest} tokens); raise it or trim the traffic")
    return given or longest


def _gpus(names: Sequence[str] | None, prices: PriceTable) -> tuple[HardwareSpec, ...]:
    """The listed GPUs (each must have a price), or every catalog GPU the provider prices."""
    if names is None:
        return tuple(g for g in gpu_catalog().values() if prices.for_gpu(g.id))
    if not names:
        raise InputError("the --gpu list is empty; give at least one GPU (see 'kvplan gpus')")
    given = {g.id: (g, n) for g, n in ((load_gpu(n), n) for n in names)}
    for g, name in given.values():
        if not prices.for_gpu(g.id):  # --price reads a file GPU by its file, as --gpu does
            key = g.id if catalog_id(g.id) is not None else name
            raise InputError(f"no {prices.provider} price for {g.id}; give --price "
                             f"{key}=USD_PER_GPU_HOUR or another --provider")
    return tuple(g for g, _ in given.values())


def _explained(c: Candidate) -> Candidate:
    """The binding resource at the capacity point; the binding SLO term is the one that
    breaks first with one replica fewer (``breaking_term``), where that fleet fails."""
    if c.capacity is None or c.capacity.rate_rps <= 0:
        return c
    f = c.fleet_one_fewer
    cap = c.capacity
    term = breaking_term(c.fleet, f)
    if f is not None and term is not None:
        cap = replace(cap, binding_slo=term, goodput_misses=f.goodput_misses)
        return replace(c, binding=binding(cap, f"with {counted(f.replicas, 'replica')}"))
    return replace(c, binding=binding(cap))


def _report(o: PlanOptions, workers: int, executor: str, cands: list[Candidate],
            t: Tally, wall_s: float) -> SearchReport:
    counts = tuple((s, sum(1 for c in cands if c.stage == s)) for s in STAGES)
    return SearchReport(search=o.search, executor=executor, workers=workers,
                        enumerated=len(cands), stage_counts=counts,
                        capacity_searches=t.capacity_searches,
                        fleet_simulations=t.fleet_simulations, probes=t.probes,
                        sim_requests=t.sim_requests, wall_s=wall_s)


def outside_space(model: ModelSpec, space: SearchSpace, prices: PriceTable) -> dict[str, str]:
    """Lever values the space does not hold: a larger TP, other priced GPUs, fp8 weights."""
    out = {}
    tps = [tp for tp in valid_tp_degrees(model) if tp > max(space.tensor_parallel_sizes)]
    if tps:
        out["tp"] = f"--tensor-parallel-size {tps[0]}"
    held = {g.id for g in space.gpus}
    gpus = [g for g in prices.gpus if g not in held]
    if gpus:
        out["gpu"] = f"--gpu {','.join(gpus)}"
    if "fp8" not in space.quantizations and model.quantization is None:
        out["quantization"] = "--quantization fp8"
    return out


def _what_if(spec: ModelSpec, winner: Candidate | None) -> tuple[str, ...]:
    """The winner's --quantization where this checkpoint cannot be served with it (AWQ /
    GPTQ / ModelOpt need their export: vLLM's "Cannot find the config file for gptq"): its
    serve line is a what-if, as `kvplan capacity` notes for the same flags."""
    from kvplan.costs.memory.weight_formats import what_if_note

    if winner is None:
        return ()
    note = what_if_note(winner.deployment.engine.quantization, spec.quantization,
                        spec.moe is not None)
    return (f"the winner's {note}",) if note else ()


def _assemble(spec: ModelSpec, traffic: PlanTraffic, slo: Slo, prices: PriceTable,
              o: PlanOptions, space: SearchSpace, cands: list[Candidate],
              winner: Candidate | None, lev: tuple[Lever, ...], report: SearchReport,
              lim: Limits, advice: str = "") -> Plan:
    today = o.today or dt.date.today()
    searched = {g.id for g in space.gpus}  # a row of a GPU not searched prices nothing here
    warnings = tuple(f"price of {r.gpu} at {r.provider} was observed on {r.observed_on} "
                     f"({r.age_days(today)} days ago); check {r.source_url}"
                     for r in prices.stale_rows(today) if r.gpu in searched)
    serve, bench = serve_and_bench(winner, traffic, slo, o.model_id) if winner else ("", "")
    warnings += _what_if(spec, winner)
    if winner is not None and traffic.own_arrivals:
        warnings += (f"Verify approximates {traffic.name}: vllm bench serve cannot replay a "
                     "trace's own arrival times and lengths, so it sends random prompts of "
                     "the trace's median lengths at its mean rate, with --burstiness "
                     f"{traffic.burstiness:.2g} (its gaps' mean^2 / variance)",)
    elif winner is not None and not replayable(traffic):
        warnings += (f"Verify approximates {traffic.name}: vllm bench serve cannot replay its "
                     "lengths, so it sends random prompts of their medians",)
    warnings += seed_warning(traffic) if winner is not None else ()
    why = "" if winner else infeasible_why(cands, lim, o.max_gpus,
                                           outside_space(spec, space, prices), advice)
    if why and o.slo_margin == "band":
        why += ("; with --slo-margin band the SLO must hold at the error band's pessimistic "
                "edge (--slo-margin none judges the prediction itself)")
    return Plan(model=spec.name, mode="capacity" if traffic.rate_rps is None else "target",
                target_rate_rps=traffic.rate_rps, slo=slo, prices=prices,
                workload=traffic.name, requests=traffic.requests,
                sample_requests=len(traffic.unit), seed=o.seed, candidates=tuple(cands),
                winner=winner, levers=lev, report=report, warnings=warnings,
                infeasible_why=why, serve_command=serve, bench_command=bench,
                slo_margin=o.slo_margin,
                trace_requests=max(traffic.trace_requests, traffic.requests), advice=advice)
