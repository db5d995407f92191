"""`kvplan simulate` on a disaggregated fleet: the xPyD flags -> DisaggDeployment -> run -> show."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.common import console, print_json, write_output
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.disagg.metrics import DisaggMetrics
    from kvplan.analysis.disagg.serving import DisaggRun
    from kvplan.analysis.metrics import Metrics
    from kvplan.report.outputs import OutputTarget
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.model import ModelSpec

_PANEL = "Disaggregated prefill/decode"


def _o(flag: str, help_: str) -> Any:
    return typer.Option(flag, help=help_, rich_help_panel=_PANEL)


DisaggOpt = Annotated[str | None, _o("--disagg", "xPyD fleet, e.g. 1P1D or 2P4D.")]
PrefillGpuOpt = Annotated[str | None, _o("--prefill-gpu", "Prefill GPU (default --gpu).")]
DecodeGpuOpt = Annotated[str | None, _o("--decode-gpu", "Decode GPU (default --gpu).")]
PrefillTpOpt = Annotated[int | None, _o("--prefill-tp", "Prefill TP (default -tp).")]
DecodeTpOpt = Annotated[int | None, _o("--decode-tp", "Decode TP (default -tp).")]
PrefillNOpt = Annotated[int | None, _o("--prefill-instances", "x of xPyD.")]
DecodeNOpt = Annotated[int | None, _o("--decode-instances", "y of xPyD.")]
LinkOpt = Annotated[str | None, _o("--kv-link", "KV link id (default ib-ndr).")]
RouterOpt = Annotated[str | None, _o("--router", "round-robin or least-outstanding.")]
DISAGG_FIELDS = ("disagg", "prefill_gpu", "decode_gpu", "prefill_tp", "decode_tp",
                 "prefill_instances", "decode_instances", "kv_link")
DEFAULT_LINK = "ib-ndr"
_XPYD = re.compile(r"(\d{1,4})P(\d{1,4})D", re.IGNORECASE)


def disagg_given(given: dict[str, Any]) -> bool:
    """Whether any disaggregation flag was given (then the fleet is disaggregated);
    --router alone is refused (one simulated server has no router)."""
    if any(given.get(k) is not None for k in DISAGG_FIELDS):
        return True
    if given.get("router") is not None:
        raise InputError("--router routes a disaggregated fleet's proxy; give --disagg xPyD "
                         "(one server has no router; fleets of replicas: kvplan plan)")
    return False


def counts(given: dict[str, Any]) -> tuple[int, int]:
    """(x, y) from --disagg xPyD and/or --prefill-instances / --decode-instances."""
    x, y = given.get("prefill_instances"), given.get("decode_instances")
    text = given.get("disagg")
    if text is not None:
        m = _XPYD.fullmatch(text.strip())
        if m is None:
            raise InputError(f"--disagg {text!r}: write xPyD, e.g. 1P1D or 2P4D")
        px, py = int(m.group(1)), int(m.group(2))
        for flag, given_n, n in (("--prefill-instances", x, px), ("--decode-instances", y, py)):
            if given_n is not None and given_n != n:
                raise InputError(f"--disagg {text} says {n} but {flag} {given_n}; give one")
        x, y = px, py
    return (1 if x is None else x), (1 if y is None else y)


def build_deployment(given: dict[str, Any], spec: ModelSpec,
                     settings: dict[str, Any]) -> DisaggDeployment:
    """The DisaggDeployment the flags describe (shared engine flags, per-pool GPU and TP)."""
    from kvplan.cli import flags as fl
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link

    x, y = counts(given)
    tp = settings.get("tensor_parallel_size", 1)
    pools = []
    for role, n in (("prefill", x), ("decode", y)):
        if n < 1:
            raise InputError(f"--{role}-instances must be at least 1, got {n}")
        role_tp = given.get(f"{role}_tp") or tp
        try:
            engine = fl.resolve_engine({**settings, "tensor_parallel_size": role_tp}, spec)
        except InputError as exc:
            if given.get(f"{role}_tp") is None:
                raise
            raise InputError(str(exc).replace("--tensor-parallel-size", f"--{role}-tp")) from None
        gpu = load_gpu(given.get(f"{role}_gpu") or given["gpu"])
        pools.append(Deployment(model=spec, gpu=gpu, engine=engine, replicas=n))
    link = load_link(given.get("kv_link") or DEFAULT_LINK)
    return DisaggDeployment(prefill=pools[0], decode=pools[1], link=link,
                            router=given.get("router") or "round-robin")


def run_disagg(given: dict[str, Any], spec: ModelSpec, settings: dict[str, Any], wargs: Any,
               opts: tuple[Any, Any, dict[str, float]], save_out: OutputTarget | None,
               as_json: bool, render: Callable[..., None]) -> None:
    """Simulate, then print the text view or one JSON object (and --save-result);
    ``render`` prints the client's figures as `kvplan simulate` does for one server."""
    from kvplan.analysis import metrics as mx
    from kvplan.analysis.disagg.metrics import disagg_metrics, in_flight_peak
    from kvplan.analysis.disagg.serving import simulate_disagg_serving

    if given.get("plot") is not None:
        raise InputError("--plot draws one server's KV usage; a disaggregated fleet has two "
                         "pools: use --json (its kv_usage_by_pool) or drop --disagg")
    pm, pct, slo = opts
    dd = build_deployment(given, spec, settings)
    run = simulate_disagg_serving(dd, wargs, profile=given.get("profile"),
                                  ttft_slo_ms=slo.get("ttft"))
    m = mx.compute_metrics(run.result.client, percentile_metrics=pm, percentiles=pct,
                           goodput_ms=slo or None)
    m = replace(m, max_concurrent_requests=in_flight_peak(run.result.client))
    dm = disagg_metrics(run.result, pct)
    doc = disagg_doc(run, m, dm, wargs)
    if save_out is not None:
        from kvplan.report.json_out import dumps

        saved = {**doc, **_detailed(run, m)} if given.get("save_detailed") else doc
        write_output(save_out, dumps(saved) + "\n", as_json=as_json)
    if as_json:
        print_json(doc)
        return
    render_disagg(run, m, dm, doc)


PER_REQUEST = ("input_lens", "output_lens", "ttfts", "itls", "errors")


def _detailed(run: DisaggRun, m: Metrics) -> dict[str, Any]:
    """--save-detailed's per-request lists (vLLM's keys) of the client's view."""
    from kvplan.analysis.metrics import save_result_json

    full = save_result_json(run.result.client, m, {}, detailed=True)
    return {k: full[k] for k in PER_REQUEST}


def disagg_doc(run: DisaggRun, m: Metrics, dm: DisaggMetrics, wargs: Any) -> dict[str, Any]:
    """`vllm bench serve`'s keys for the client's view, then the fleet's added keys."""
    from kvplan.analysis.disagg.metrics import disagg_json, pool_kv_series
    from kvplan.analysis.metrics import kvplan_extras, rejected_list, vllm_result

    extras = kvplan_extras(m)
    for k in ("peak_kv_blocks", "num_blocks", "peak_kv_usage", "num_steps"):
        extras.pop(k)  # one server's figures; the pools' own are below
    return {**run.header(wargs), **vllm_result(m), **extras, **disagg_json(dm),
            "rejected": rejected_list(run.result.client),
            "kv_usage_by_pool": pool_kv_series(run.result)}


def render_disagg(run: DisaggRun, m: Metrics, dm: DisaggMetrics, doc: dict[str, Any]) -> None:
    """The text view: the client's figures (as for one server), then the fleet's."""
    from rich.table import Table

    from kvplan.cli.metrics_table import render_metrics
    from kvplan.report.durations import fmt_ms
    from kvplan.units import fmt_bytes

    render_metrics(m, doc, kv_rows=False)
    d = run.deployment
    t = Table(title=f"{d.label} over {d.link.id}: {d.total_gpus} GPUs", show_header=False)
    for role, pool, u in (("Prefill", d.prefill, dm.prefill), ("Decode", d.decode, dm.decode)):
        t.add_row(f"{role} pool", f"{pool.replicas} x {pool.gpu.id} TP"
                                  f"{pool.engine.tensor_parallel_size}")
        t.add_row(f"{role} peak KV blocks", f"{u.peak_kv_blocks} / {u.usable_blocks} usable "
                                            f"per instance ({100 * u.peak_kv_usage:.1f} %)")
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


def _top(s: Any) -> tuple[str, float]:
    """The highest percentile asked for (its word and value in ms), else the median."""
    from kvplan.analysis.metrics import p_word

    if not s.percentiles_ms:
        return "median", s.median_ms
    p, v = s.percentiles_ms[-1]
    return f"P{p_word(p)}", v
