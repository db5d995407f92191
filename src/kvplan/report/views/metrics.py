"""The `vllm bench serve`-style metrics table of a simulation (one server or a fleet), and
the lines `kvplan simulate` prints under it (``run_lines``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.analysis.metrics import Metrics
    from kvplan.sim.result import SimulationResult

CLI_PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
"""`kvplan simulate`'s default --percentile-metrics (vLLM's ttft,tpot,itl plus e2el): what the
notebook and the HTML report show of a run, as the CLI prints it (docs/metrics.md)."""


def metrics_table(m: Metrics, header: dict[str, Any], *, kv_rows: bool = True) -> Any:
    """The table (a rich Table); ``header``: model_id, gpu, dataset, num_prompts;
    ``kv_rows``: one server's KV rows too."""
    from rich.table import Table

    from kvplan.analysis.metrics import p_word
    from kvplan.report.durations import fmt_ms
    from kvplan.units import fmt_seconds

    t = Table(title=f"{header['model_id']} on {header['gpu']}: {header['dataset']}, "
                    f"{header['num_prompts']} requests", show_header=False)
    rows = [
        ("Successful requests", f"{m.completed}"), ("Failed (rejected)", f"{m.failed}"),
        *_traffic_rows(header), ("Duration", fmt_seconds(m.duration_s)),
        ("Total input tokens", f"{m.total_input_tokens}"),
        ("Total generated tokens", f"{m.total_output_tokens}"),
        ("Request throughput (req/s)", f"{m.request_throughput:.2f}"),
        # vLLM prints its goodput right under the request throughput, when --goodput is set
        *([] if m.request_goodput is None else [
            ("Request goodput (req/s)", f"{m.request_goodput:.2f}")]),
        ("Output token throughput (tok/s)", f"{m.output_throughput:.2f}"),
        ("Peak output token throughput (tok/s)", f"{m.max_output_tokens_per_s:.2f}"),
        ("Peak concurrent requests", f"{m.max_concurrent_requests}"),
        ("Total token throughput (tok/s)", f"{m.total_token_throughput:.2f}"),
    ]
    for name, s in m.stats.items():
        rows.append((f"Mean / median {name.upper()}",
                     f"{fmt_ms(s.mean_ms)} / {fmt_ms(s.median_ms)}"))
        rows += [(f"P{p_word(p)} {name.upper()}", fmt_ms(v)) for p, v in s.percentiles_ms]
    rows += [
        ("Preemptions", f"{m.preemptions}"),
        ("Prefix cache hit rate", f"{100 * m.prefix_cache_hit_rate:.1f} %"),
    ]
    if kv_rows:
        rows += _kv_rows(m)
    for k, v in rows:
        t.add_row(k, v)
    return t


def _traffic_rows(header: dict[str, Any]) -> list[tuple[str, str]]:
    """vLLM's rows for the client's settings: printed only when set, as vLLM prints them."""
    rows = []
    if header.get("max_concurrency") is not None:
        rows.append(("Maximum request concurrency", f"{header['max_concurrency']}"))
    rate = header.get("request_rate")
    if isinstance(rate, int | float) and rate != float("inf"):
        rows.append(("Request rate configured (RPS)", f"{rate:.2f}"))
    return rows


def _kv_rows(m: Metrics) -> list[tuple[str, str]]:
    return [
        ("Peak KV blocks", f"{m.peak_kv_blocks} / {m.usable_blocks} usable "
                           f"({100 * m.peak_kv_usage:.1f} %)"),
        ("KV claimed by prefill / decode", f"{100 * m.prefill_kv_share:.0f} % / "
                                           f"{100 * m.decode_kv_share:.0f} %"),
        ("Engine steps", f"{m.num_steps}"),
    ]


def run_lines(result: SimulationResult, header: dict[str, Any],
              bands: dict[str, Any]) -> list[Any]:
    """What `kvplan simulate` prints under the table, in order: a DP fleet's ranks, the
    rejections by reason and an overload warning (rich Text, styled), the calibration band
    and its notes (``bands``: ``json_views.simulate_bands``)."""
    return [*_rank_lines(header), *_verdict_lines(result), *_band_lines(bands)]


def _rank_lines(header: dict[str, Any]) -> list[str]:
    """A DP fleet: one line per rank (requests routed, peak KV, dummy steps)."""
    ranks = header.get("dp_ranks")
    if not ranks:
        return []
    return [f"DP {header['data_parallel_size']} ranks in lockstep, "
            f"{header['dp_lockstep_steps']} steps:"] + [
        f"  rank {r['rank']}: {r['requests']} requests, peak KV {r['peak_kv_blocks']} / "
        f"{r['num_gpu_blocks'] - 1} blocks ({100 * r['peak_kv_usage']:.1f} %), "
        f"{r['dummy_steps']} dummy steps" for r in ranks]


def _verdict_lines(result: SimulationResult) -> list[Any]:
    """Rejections, one line per reason with examples, and an overload warning, if any."""
    from rich.text import Text

    from kvplan.analysis.overload import overload

    out: list[Any] = []
    if result.rejected:  # the usual run: the planner's grouping stays unloaded
        from kvplan.analysis.plan.why.rejections import group_rejections

        out += [Text(g.line(), style="yellow") for g in group_rejections(result.rejected)]
    load = overload(result)
    if load is not None and load.overloaded:
        out.append(Text(load.message(), style="bold red"))
    return out


def _band_lines(bands: dict[str, Any]) -> list[str]:
    from kvplan.report.durations import fmt_ms_range

    parts = []
    for key, label, unit in (("mean_ttft_ms", "TTFT", "ms"), ("mean_tpot_ms", "TPOT", "ms"),
                             ("output_throughput", "output throughput", "tok/s")):
        band = bands.get(f"{key}_band")
        if band is not None:
            text = (fmt_ms_range(*band) if unit == "ms"
                    else f"{band[0]:,.2f}-{band[1]:,.2f} {unit}")
            parts.append(f"{label} {text}")
    out = [f"band (10-90%, {bands['band_basis']}): " + "; ".join(parts)] if parts else []
    return out + [f"note: {note}" for note in dict.fromkeys(bands.get("calibration_notes", ()))]
