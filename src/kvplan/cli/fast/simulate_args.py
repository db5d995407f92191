"""``kvplan simulate`` arguments parsed without typer, to the dict typer hands the command.

A plain run (the model, known options each once, values typer would take as they are) is
parsed here; anything else (help, an unknown or repeated option, a value typer would refuse
or read differently, a disaggregated fleet) gives None and typer parses it, saying what is
wrong in its own words. tests/test_cli_fast_simulate.py checks this table against the typer
command's parameters and the parses against typer's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvplan.cli.fast.flag_table import FLAGS
from kvplan.cli.fast.simulate_run import DISAGG_FLAGS

FLAG = "flag"
"""An on/off option (``--json``; ``--x/--no-x`` pairs have a value each)."""
MULTI = "multi"
"""An option that may repeat (``--goodput``), collected in a list."""

Kind = Callable[[str], Any] | str
_OWN: dict[str, tuple[str, Kind]] = {
    "--gpu": ("gpu", str), "--profile": ("profile", str), "--dataset": ("dataset", str),
    "--num-prompts": ("num_prompts", int), "--random-input-len": ("random_input_len", int),
    "--random-output-len": ("random_output_len", int),
    "--random-range-ratio": ("random_range_ratio", float),
    "--random-prefix-len": ("random_prefix_len", int), "--request-rate": ("request_rate", float),
    "--burstiness": ("burstiness", float), "--max-concurrency": ("max_concurrency", int),
    "--seed": ("seed", int), "--time-scale": ("time_scale", float), "--trace": ("trace", str),
    "--trace-columns": ("trace_columns", str), "--goodput": ("goodput", MULTI),
    "--percentile-metrics": ("percentile_metrics", str),
    "--metric-percentiles": ("metric_percentiles", str), "--save-result": ("save_result", Path),
    "--save-detailed": ("save_detailed", FLAG), "--plot": ("plot", Path),
    "--json": ("as_json", FLAG), "--all2all-backend": ("all2all_backend", str),
    "--expert-imbalance": ("expert_imbalance", float),
    "--mxfp4-moe-backend": ("mxfp4_moe_backend", str),
}


def _engine_options() -> dict[str, tuple[str, Kind, Any]]:
    """The engine flags as typer declares them (cli/flags.py): int and float values as such,
    the rest as text (parse_flag reads it later), booleans as --x/--no-x."""
    out: dict[str, tuple[str, Kind, Any]] = {}
    for f in FLAGS:
        if f.is_bool:
            out[f.names[0]] = (f.field, FLAG, True)
            out[f"--no-{f.names[0][2:]}"] = (f.field, FLAG, False)
            continue
        kind = f.parse if f.parse in (int, float) else str
        out.update({name: (f.field, kind, None) for name in f.names})
    return out


OPTIONS: dict[str, tuple[str, Kind, Any]] = {
    **_engine_options(), **{k: (field, kind, True) for k, (field, kind) in _OWN.items()}}
"""Option name -> (parameter, parser or FLAG / MULTI, a flag's value)."""
DEFAULTS: dict[str, Any] = {
    **{f.field: None for f in FLAGS}, **{field: None for field, _ in _OWN.values()},
    **dict.fromkeys(DISAGG_FLAGS), "model_and_args": None, "gpu": "H100", "random_input_len": 1024,
    "random_output_len": 128, "random_range_ratio": 0.0, "random_prefix_len": 0,
    "burstiness": 1.0, "seed": 0, "time_scale": 1.0, "percentile_metrics": "ttft,tpot,itl,e2el",
    "metric_percentiles": "99", "save_detailed": False, "as_json": False,
}
"""Every simulate parameter's default (typer's)."""
_SLO_VALUE = re.compile(r"^[A-Za-z0-9_]+:(p[0-9.]+:)?[0-9.eE+-]+$")
"""cli.app's: the values after --goodput that are its (cli.app.expand_multi_value)."""


def simulate_args(args: list[str]) -> dict[str, Any] | None:
    """``simulate MODEL [--opt VALUE | --opt=VALUE | --flag ...] [-- vllm serve ...]`` as
    simulate's parameters (defaults filled in; ``model_and_args``: MODEL and the words after
    ``--``, as click collects them), or None for anything typer should parse."""
    if not args or args[0] != "simulate":
        return None
    given: dict[str, Any] = {}
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        if arg == "--":  # the rest is a pasted line (fast/pasted_args.py reads it)
            given["model_and_args"] = [*given.get("model_and_args", []), *rest]
            break
        if not arg.startswith("-"):
            if "model_and_args" in given or not arg:
                return None
            given["model_and_args"] = [arg]
            continue
        name, eq, text = arg.partition("=")
        if name not in OPTIONS:
            return None
        field, kind, on = OPTIONS[name]
        if eq and len(name) == 2:  # click reads -q=fp8 as the value "=fp8"
            return None
        if kind == FLAG:
            if eq or field in given:
                return None
            given[field] = on
            continue
        if not eq:
            if not rest:
                return None
            text = rest.pop(0)
        value = _value(kind, text, field in given)
        if value is None:
            return None
        given[field] = [*given.get(field, []), *value] if kind == MULTI else value
        if kind == MULTI and not eq:
            while rest and _SLO_VALUE.match(rest[0]):  # --goodput ttft:500 tpot:50
                given[field].append(rest.pop(0))
    return None if not given.get("model_and_args") else {**DEFAULTS, **given}


def _value(kind: Kind, text: str, repeated: bool) -> Any:
    """The value typer would give, or None where typer should see it (a repeat, an empty or
    dash-led value, a number int()/float() refuse, an unreadable path)."""
    if (repeated and kind != MULTI) or not text or text.startswith("-") or text != text.strip():
        return None
    if kind == MULTI:
        return [text]
    if kind is Path:
        return None if os.path.exists(text) and not os.access(text, os.R_OK) else Path(text)
    try:
        return kind(text)  # type: ignore[operator]
    except ValueError:
        return None
