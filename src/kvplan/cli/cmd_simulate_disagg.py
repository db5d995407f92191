"""`kvplan simulate` on a disaggregated fleet: the xPyD flags -> DisaggDeployment -> run -> show."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.analysis.disagg.answer import DEFAULT_LINK, DISAGG_FIELDS
from kvplan.cli.common import console, print_json, write_output
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.disagg.metrics import DisaggMetrics
    from kvplan.analysis.disagg.serving import DisaggRun
    from kvplan.analysis.metrics import Metrics
    from kvplan.report.outputs import OutputTarget
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.model import ModelSpec

__all__ = ["DEFAULT_LINK", "DISAGG_FIELDS", "build_deployment", "counts", "disagg_given",
           "run_disagg"]
_PANEL = "Disaggregated prefill/decode"


def _o(flag: str, help_: str) -> Any:
    return typer.Option(flag, help=help_, rich_help_panel=_PANEL)


DisaggOpt = Annotated[str | None, _o("--disagg", "xPyD fleet, e.g. 1P1D or 2P4D.")]
PrefillGpuOpt = Annotated[str | None, _o("--prefill-gpu", "Prefill GPU (default --gpu).")]
DecodeGpuOpt = Annotated[str | None, _o("--decode-gpu", "Decode GPU (default --gpu).")]
PrefillTpOpt = Annotated[int | None, _o("--prefill-tp", "Prefill TP (default -tp).")]
DecodeTpOpt = Annotated[int | None, _o("--decode-tp", "Decode TP (default -tp).")]
PrefillDpOpt = Annotated[int | None, _o("--prefill-dp", "Prefill DP ranks per instance "
                                                         "(default -dp).")]
DecodeDpOpt = Annotated[int | None, _o("--decode-dp", "Decode DP ranks per instance "
                                                       "(default -dp).")]
PrefillNOpt = Annotated[int | None, _o("--prefill-instances", "x of xPyD.")]
DecodeNOpt = Annotated[int | None, _o("--decode-instances", "y of xPyD.")]
LinkOpt = Annotated[str | None, _o("--kv-link", "KV link id (default ib-ndr).")]
RouterOpt = Annotated[str | None, _o("--router", "round-robin or least-outstanding.")]


def disagg_given(given: dict[str, Any]) -> bool:
    """Whether any disaggregation flag was given (analysis/disagg/answer.py)."""
    from kvplan.analysis.disagg.answer import disagg_given as given_any

    return given_any(given)


def counts(given: dict[str, Any]) -> tuple[int, int]:
    """(x, y) from --disagg xPyD and/or --prefill-instances / --decode-instances."""
    from kvplan.analysis.disagg.answer import xpyd_counts

    return xpyd_counts(given.get("disagg"), given.get("prefill_instances"),
                       given.get("decode_instances"))


def build_deployment(given: dict[str, Any], spec: ModelSpec,
                     settings: dict[str, Any]) -> DisaggDeployment:
    """The DisaggDeployment the flags describe (shared engine flags, per-pool GPU and TP)."""
    from kvplan.analysis.disagg.answer import Pool, fleet, role_gpu
    from kvplan.cli import flags as fl
    from kvplan.specs.disagg import pool_flags
    from kvplan.specs.hardware import load_gpu

    x, y = counts(given)
    tp = settings.get("tensor_parallel_size", 1)
    dp = settings.get("data_parallel_size") or 1
    pools = []
    for role, n in (("prefill", x), ("decode", y)):
        role_tp = tp if given.get(f"{role}_tp") is None else given[f"{role}_tp"]
        role_dp = dp if given.get(f"{role}_dp") is None else given[f"{role}_dp"]
        try:
            engine = fl.resolve_engine({**settings, "tensor_parallel_size": role_tp,
                                        "data_parallel_size": role_dp}, spec)
        except InputError as exc:
            if given.get(f"{role}_tp") is None and given.get(f"{role}_dp") is None:
                raise
            raise InputError(pool_flags(str(exc), role)) from None
        name = given.get(f"{role}_gpu")
        gpu = role_gpu(load_gpu, name, role) if name else load_gpu(given["gpu"])
        pools.append(Pool(gpu=gpu, engine=engine, instances=n))
    return fleet(spec, pools[0], pools[1], given.get("kv_link"), given.get("router"))


def run_disagg(given: dict[str, Any], spec: ModelSpec, settings: dict[str, Any], wargs: Any,
               opts: tuple[Any, Any, dict[str, float]], save_out: OutputTarget | None,
               as_json: bool, render: Callable[..., None]) -> None:
    """Simulate, then print the text view or one JSON object (and --save-result);
    ``render`` prints the client's figures as `kvplan simulate` does for one server."""
    if given.get("plot") is not None:
        raise InputError("--plot draws one server's KV usage; a disaggregated fleet has two "
                         "pools: use --json (its kv_usage_by_pool) or drop --disagg")
    from kvplan.analysis.disagg.answer import disagg_doc, measure

    pm, pct, slo = opts
    dd = build_deployment(given, spec, settings)
    run, m, dm = measure(dd, wargs, percentile_metrics=pm, percentiles=pct, goodput_ms=slo,
                         profile=given.get("profile"))
    doc = disagg_doc(run, m, dm, wargs)
    if save_out is not None:
        from kvplan.report.json_out import dumps_chunks

        saved = {**doc, **_detailed(run)} if given.get("save_detailed") else doc
        write_output(save_out, dumps_chunks(saved), as_json=as_json)
    if as_json:
        print_json(doc)
        return
    render_disagg(run, m, dm, doc)


def _detailed(run: DisaggRun) -> dict[str, Any]:
    """--save-detailed's per-request lists (vLLM's keys) of the client's view."""
    from kvplan.analysis.metrics import per_request_lists

    return per_request_lists(run.result.client, flat_itls=True)


def render_disagg(run: DisaggRun, m: Metrics, dm: DisaggMetrics, doc: dict[str, Any]) -> None:
    """The text view: the client's figures (as for one server), then the fleet's."""
    from rich.table import Table

    from kvplan.cli.metrics_table import render_metrics
    from kvplan.report.durations import fmt_ms
    from kvplan.units import fmt_bytes

    render_metrics(m, doc, kv_rows=False)
    d = run.deployment
    t = Table(title=f"{d.label} over {d.link.id}: {d.total_gpus} GPUs", show_header=False)
    from kvplan.specs.disagg import pool_label

    for role, pool, u in (("Prefill", d.prefill, dm.prefill), ("Decode", d.decode, dm.decode)):
        t.add_row(f"{role} pool", f"{pool.replicas} x {pool.gpu.id} {pool_label(pool)}")
        each = "per DP rank" if u.dp > 1 else "per instance"
        t.add_row(f"{role} peak KV blocks", f"{u.peak_kv_blocks} / {u.usable_blocks} usable "
                                            f"{each} ({100 * u.peak_kv_usage:.1f} %)")
        t.add_row(f"{role} engine steps", f"{u.num_steps}")
    t.add_row("KV moved over the link", f"{fmt_bytes(dm.link_bytes)} in {dm.transfers} "
                                        "transfers")
    for label, s in (("KV transfer", dm.transfer), ("Transfer queueing", dm.transfer_queue),
                     ("Prefill KV held after prefill", dm.prefill_hold),
                     ("Decode admission wait", dm.admission_wait),
                     ("Wait for decode blocks", dm.decode_block_wait)):
        word, top = _top(s)
        t.add_row(f"Mean / {word} {label}", f"{fmt_ms(s.mean_ms)} / {fmt_ms(top)}")
    t.add_row("Requests that waited for decode blocks", f"{dm.decode_block_waits}")
    console.print(t)
    from kvplan.analysis.plan.why.rejections import group_rejections

    for group in group_rejections(run.result.client.rejected):
        console.print(f"[yellow]{group.line()}[/yellow]")
    late = _refused_after_prefill(run)
    if late:
        from kvplan.sim.disagg.link import NIXL_ABORT_REQUEST_TIMEOUT_S
        from kvplan.units import counted

        console.print(f"[yellow]Refused by the decode side after their prefill ran: "
                      f"{counted(late, 'request')} of the rejected (vLLM's proxy sends every "
                      f"request to a prefill instance first); "
                      f"each kept its prefill KV blocks {NIXL_ABORT_REQUEST_TIMEOUT_S:.0f} s "
                      f"(VLLM_NIXL_ABORT_REQUEST_TIMEOUT) after its prefill[/yellow]")


def _refused_after_prefill(run: DisaggRun) -> int:
    """Rejected requests whose prefill ran (the decode side refused them)."""
    import numpy as np

    gone = np.array(sorted(run.result.client.rejected), dtype=np.int64)
    return int((~np.isnan(run.result.transfers.prefill_end_s[gone])).sum())


def _top(s: Any) -> tuple[str, float]:
    """The highest percentile asked for (its word and value in ms), else the median."""
    from kvplan.analysis.metrics import p_word

    if not s.percentiles_ms:
        return "median", s.median_ms
    p, v = s.percentiles_ms[-1]
    return f"P{p_word(p)}", v
