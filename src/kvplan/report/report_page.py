"""`kvplan report`: the answers for one model/GPU/workload gathered into report sections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.costs.step.latency import RequestShape
from kvplan.report.charts import chart_spec
from kvplan.report.durations import fmt_ms
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import fmt_bytes, fmt_seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    """One part of the report: a heading, the rows a person reads, the charts, the JSON."""

    id: str
    title: str
    rows: tuple[tuple[str, str], ...]
    charts: tuple[dict[str, Any], ...]
    answer: dict[str, Any]
    lines: tuple[str, ...] = ()


def model_section(spec: ModelSpec, engine: EngineConfig, batch: int, context: int) -> Section:
    """Bytes per token with the formula, and the levers for ``batch`` x ``context``."""
    from kvplan.analysis.footprint import lever_table, servable_tp_degrees
    from kvplan.analysis.kv_view import kv_report
    from kvplan.report.budget_charts import levers_chart
    from kvplan.report.json_views import kv_json, levers_json

    kv = kv_json(kv_report(spec, engine.kv_cache_dtype, engine.tensor_parallel_size,
                           engine.block_size))
    levers = lever_table(spec, batch, context, tp_degrees=servable_tp_degrees(spec))
    rows = tuple((r.lever, f"{fmt_bytes(r.total_bytes_per_gpu)} ({r.factor_vs_baseline:.3g}x MHA)")
                 for r in levers)
    tp = engine.tensor_parallel_size
    per_gpu = ((f"bytes per token per GPU (TP {tp})", f"{kv['bytes_per_token_per_gpu']:,}"),
               ) if tp > 1 else ()  # what the Request and Capacity sections hold, as `kv`
    return Section(id="model", title=f"Model: {spec.name} ({spec.attention_kind})",
                   rows=(("bytes per token (whole model)", f"{kv['bytes_per_token']:,}"),
                         *per_gpu, *rows),
                   charts=(chart_spec(levers_chart(levers, spec.name)),),
                   answer={"kv": kv, "levers": levers_json(spec.name, batch, context, levers)},
                   lines=tuple(kv["formula"] + (kv["formula_per_gpu"] if tp > 1 else [])))


def request_section(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                    shape: RequestShape) -> Section:
    """One request's claim schedule, chunked as vLLM chunks it on ``hw``: by the token budget
    (--max-num-batched-tokens, else vLLM's default for the GPU, as the capacity section
    shows), unless chunked prefill is off; in the blocks vLLM allocates there (an MLA
    backend's forced block, as the capacity section logs it)."""
    from kvplan.analysis.timeline import request_timeline
    from kvplan.costs.memory.resolved import step_token_budget
    from kvplan.costs.memory.settings import mla_block_size
    from kvplan.report.charts import staircase_chart
    from kvplan.report.render import timeline_json
    from kvplan.specs.kv import kv_spec

    kv = kv_spec(spec, engine.kv_cache_dtype, engine.tensor_parallel_size)
    chunk = step_token_budget(engine, hw) if engine.enable_chunked_prefill else None
    block = mla_block_size(spec, hw, engine.block_size)
    tl = request_timeline(kv, shape.prompt_tokens, shape.output_tokens,
                          chunk_tokens=chunk, block_size=block)
    rows = (("prefill claims", f"{fmt_bytes(tl.prefill_bytes)} in {tl.prefill_steps} step(s)"),
            ("decode adds", fmt_bytes(tl.decode_bytes)), ("final cache", fmt_bytes(tl.final_bytes)),
            ("prefill share", f"{tl.prefill_share:.1%}"))
    pp = engine.pipeline_parallel_size
    lines = (f"bytes of all {spec.num_layers} layers on one GPU of the TP group: under PP {pp} "
             "each stage's GPUs hold only their own layers' share",) if pp > 1 else ()
    return Section(id="request", title=f"Request: {shape.prompt_tokens} prompt + "
                   f"{shape.output_tokens} output tokens", rows=rows, lines=lines,
                   charts=(chart_spec(staircase_chart(tl, spec.name)),),
                   answer=timeline_json(spec.name, kv, tl))


def capacity_section(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> Section:
    """vLLM's memory budget, blocks, tokens and concurrency."""
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.report.budget_charts import budget_chart
    from kvplan.report.json_views import plan_json
    from kvplan.report.parallel_view import ep_warning, is_parallel, parallel_json, parallel_lines
    from kvplan.report.views.capacity import capacity_renderables

    plan = plan_memory(spec, hw, engine)
    b = plan.budget
    answer = plan_json(plan)
    if is_parallel(plan):  # as `capacity --json` adds it: per DP rank and fleet figures
        answer["parallel"] = parallel_json(plan, spec)
    rows = (("requested", fmt_bytes(b.requested_bytes)), ("weights", fmt_bytes(b.weights_bytes)),
            ("peak activation", fmt_bytes(b.activation_bytes)),
            ("non-torch", fmt_bytes(b.non_torch_bytes)),
            ("KV cache", fmt_bytes(b.available_kv_bytes)), ("blocks", f"{plan.num_blocks:,}"),
            ("GPU KV cache size", f"{plan.kv_cache_tokens:,} tokens"),
            ("maximum concurrency", f"{plan.max_concurrency:.2f}x at "
                                    f"{plan.settings.max_model_len:,} tokens"))
    lines = [x for x in capacity_renderables(plan) if isinstance(x, str)]  # vLLM's log lines
    lines += parallel_lines(plan, spec) if is_parallel(plan) else []
    warning = ep_warning(plan, spec)  # as `capacity` warns: EP on a dense model, on one GPU
    return Section(id="capacity", title=f"Capacity on {hw.id}", rows=rows,
                   charts=(chart_spec(budget_chart(plan)),), answer=answer,
                   lines=tuple(lines + ([warning] if warning else [])))


def latency_section(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                    shape: RequestShape, profile: str | None = None) -> Section:
    """TTFT/TPOT/throughput with the bound, and a batch sweep, the prefill chunked by the
    token budget the Request and Capacity sections show (vLLM's default for the GPU when
    --max-num-batched-tokens is not given), as vLLM runs it; under DP / EP the batch spread
    over the ranks as `kvplan latency` spreads it (and no sweep: it prices TP only)."""
    from dataclasses import replace

    from kvplan.costs.memory.resolved import resolve, step_token_budget
    from kvplan.costs.step.parallel import dp_latency as dpl
    from kvplan.costs.step.profiles import profile_for
    from kvplan.errors import DoesNotFitError
    from kvplan.report.json_views import latency_answer_json

    if engine.enable_chunked_prefill:
        engine = replace(engine, max_num_batched_tokens=step_token_budget(engine, hw))
    resolved = resolve(spec, hw, engine)
    prof = profile_for(spec, hw, engine, profile, precision=resolved.compute_precision)
    sweep, charts, lines = _latency_sweep(spec, hw, engine, shape, prof)
    budget = engine.max_num_batched_tokens
    if budget is not None:  # why `kvplan latency` without the flag (one step) differs
        lines = (f"prefill priced in steps of {budget:,} tokens, the budget the Capacity "
                 f"section shows: as 'kvplan latency --max-num-batched-tokens {budget}'", *lines)
    try:  # as `kvplan latency` does: a batch whose KV cache does not fit has no latency
        fleet = dpl.fleet_latency(spec, hw, engine, shape, prof, resolved)
    except DoesNotFitError as exc:
        why = " ".join(str(exc).split())
        return Section(id="latency", title=f"Latency at batch {shape.batch}: does not fit",
                       rows=(("does not fit", why),), charts=charts, lines=lines,
                       answer={"latency": None, "does_not_fit": why, **sweep})
    r = fleet.result
    answer = latency_answer_json(r, prof, (spec, hw.id, engine.tensor_parallel_size))
    if engine.data_parallel_size > 1 or engine.enable_expert_parallel:
        from kvplan.report.parallel_view import parallel_latency_line

        answer["parallel"] = dpl.parallel_latency_json(spec, engine, fleet.rank_shape)
        lines = (parallel_latency_line(answer["parallel"]), *lines)
    rows = (("TTFT", f"{fmt_seconds(r.ttft_s)} ({r.prefill_bound}-bound)"),
            ("TPOT", "-" if r.tpot_s is None else f"{fmt_seconds(r.tpot_s)} "
                                                  f"({r.decode_bound}-bound)"),
            ("end-to-end", fmt_seconds(r.e2e_s)),
            ("output throughput", f"{r.output_throughput_tok_s:,.0f} tok/s"))
    return Section(id="latency", title=f"Latency at batch {shape.batch}", rows=rows,
                   charts=charts, lines=(*lines, *_band_lines(answer)),
                   answer={"latency": answer, **sweep})


def _band_lines(answer: dict[str, Any]) -> list[str]:
    """`kvplan latency`'s band column and lines: the 10-90% calibration band of each figure,
    its basis and its notes."""
    def band(key: str, fmt: Any) -> str:
        b = answer[key]
        return "-" if b is None else f"{fmt(b[0])} - {fmt(b[1])}"

    return [f"band (10-90%): TTFT {band('ttft_s_band', fmt_seconds)}; TPOT "
            f"{band('tpot_s_band', fmt_seconds)}; end-to-end {band('e2e_s_band', fmt_seconds)}"
            f"; output throughput {band('output_throughput_tok_s_band', '{:,.0f}'.format)} "
            "tok/s", f"band: calibration residuals of {answer['band_basis']}",
            *(f"note: {note}" for note in answer["calibration_notes"])]


def _latency_sweep(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                   shape: RequestShape, prof: Any) -> tuple[dict[str, Any],
                                                            tuple[dict[str, Any], ...],
                                                            tuple[str, ...]]:
    """The batch sweep's JSON and chart; none under DP / EP (`latency --sweep` refuses them)."""
    from kvplan.costs.step import latency as lat
    from kvplan.report.budget_charts import sweep_chart
    from kvplan.report.json_views import sweep_json

    if engine.data_parallel_size > 1 or engine.enable_expert_parallel:
        return {"sweep": None}, (), ("no batch sweep: it prices TP deployments only, as "
                                     "'kvplan latency --sweep' does",)
    values = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512"]
    rows = lat.sweep(spec, hw, engine, shape, "batch", values, prof)
    return {"sweep": sweep_json("batch", rows)}, (chart_spec(sweep_chart("batch", rows)),), ()


def simulate_section(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                     workload: Any, profile: str | None = None) -> Section:
    """A serving simulation: KV usage with arrivals and preemptions, queue depth, CDFs."""
    from kvplan.analysis.metrics import compute_metrics, vllm_result
    from kvplan.analysis.serving import simulate_serving
    from kvplan.report import sim_charts
    from kvplan.report.json_views import simulate_bands, simulate_json
    from kvplan.report.views.metrics import CLI_PERCENTILE_METRICS, run_lines

    run = simulate_serving(spec, hw, engine, workload, profile=profile)
    header, r = run.header(workload), run.result
    m = compute_metrics(r, percentile_metrics=CLI_PERCENTILE_METRICS)
    deployment = (spec, header["gpu"], engine.tensor_parallel_size)
    answer = simulate_json(header, m, r, deployment)
    lines = tuple(str(x) for x in run_lines(r, header, simulate_bands(deployment,
                                                                      vllm_result(m))))
    rows = [("requests", f"{m.completed} done, {m.failed} rejected in "
                         f"{fmt_seconds(m.duration_s)}"),
            ("output throughput", f"{m.output_throughput:,.1f} tok/s")]
    rows += [(f"{name.upper()} median / p99", f"{fmt_ms(s.median_ms)} / "
              f"{fmt_ms(dict(s.percentiles_ms).get(99.0, float('nan')))}")
             for name, s in m.stats.items()]
    rows += [("preemptions", f"{m.preemptions}"), ("peak KV usage", f"{m.peak_kv_usage:.1%}")]
    title = f"{header['model_id']} on {header['gpu']}: KV usage"
    charts = (chart_spec(sim_charts.kv_usage_chart(r, title)),
              chart_spec(sim_charts.queue_chart(r)), chart_spec(sim_charts.latency_cdf_chart(r)))
    return Section(id="simulate", title=f"Simulation: {header['dataset']}, "
                   f"{header['num_prompts']} requests", rows=tuple(rows), charts=charts,
                   answer=answer, lines=lines)  # as `simulate` prints under its table


def report_sections(spec: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                    shape: RequestShape, workload: Any | None, *,
                    profile: str | None = None) -> list[Section]:
    """Every section for one model, GPU, request shape and (optionally) workload; ``profile``:
    a 'kvplan calibrate' file for the latency and simulation (None: the bundled one)."""
    from dataclasses import replace

    from kvplan.costs.memory.settings import mla_block_size
    from kvplan.costs.step.latency import check_context

    check_context(spec, engine, shape)  # before the model section's '--context' wording
    # the pages in the blocks vLLM allocates on ``hw`` (an MLA backend's forced block), as the
    # Request and Capacity sections hold them
    paged = replace(engine, block_size=mla_block_size(spec, hw, engine.block_size))
    sections = [model_section(spec, paged, shape.batch, shape.prompt_tokens + shape.output_tokens),
                request_section(spec, hw, engine, shape), capacity_section(spec, hw, engine),
                latency_section(spec, hw, engine, shape, profile)]
    if workload is not None:
        sections.append(simulate_section(spec, hw, engine, workload, profile))
    return sections
