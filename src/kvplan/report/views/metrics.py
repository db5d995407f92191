"""The `vllm bench serve`-style metrics table of a simulation (one server or a fleet)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.analysis.metrics import Metrics

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
        ("Duration", fmt_seconds(m.duration_s)),
        ("Request throughput (req/s)", f"{m.request_throughput:.2f}"),
        ("Output token throughput (tok/s)", f"{m.output_throughput:.2f}"),
        ("Peak output token throughput (tok/s)", f"{m.max_output_tokens_per_s:.2f}"),
        ("Total token throughput (tok/s)", f"{m.total_token_throughput:.2f}"),
    ]
    if m.request_goodput is not None:
        rows.append(("Request goodput (req/s)", f"{m.request_goodput:.2f}"))
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


def _kv_rows(m: Metrics) -> list[tuple[str, str]]:
    return [
        ("Peak KV blocks", f"{m.peak_kv_blocks} / {m.num_blocks - 1} usable "
                           f"({100 * m.peak_kv_usage:.1f} %)"),
        ("KV claimed by prefill / decode", f"{100 * m.prefill_kv_share:.0f} % / "
                                           f"{100 * m.decode_kv_share:.0f} %"),
        ("Engine steps", f"{m.num_steps}"),
    ]
