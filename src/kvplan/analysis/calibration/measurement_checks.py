"""Checks on measurement points for ``kvplan calibrate``: the same rules the flags get.

A point is a deployment (model, GPU, engine flags) and a static-batch shape, as in
``kvplan latency``; it gets the same validation before it is priced (pipeline stages <= layers,
vLLM's TP rule, the context limit), so a point with ``pipeline_parallel_size: 65536`` or
2^31 output tokens is one clean error rather than hours of pricing. Measured values must be
within ``kvplan.limits.MEASURED_S`` / ``MEASURED_TOK_S``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from kvplan.costs.step.latency_checks import check_priced_steps
from kvplan.errors import InputError, TraceError
from kvplan.limits import MAX_CALIBRATION_STEPS, MEASURED_S, MEASURED_TOK_S


def check_point(model: Any, hw: Any, engine: Any, shape: Any, settings: Any = None) -> None:
    """InputError as ``kvplan latency`` raises for these flags (pipeline stages, TP rule,
    --max-model-len), and for a request longer than the context; ``settings``: the flags
    already resolved (None: resolved here)."""
    from kvplan.costs.memory.settings import resolve_settings

    settings = settings or resolve_settings(model, hw, engine)
    cached = shape.prompt_tokens + shape.output_tokens - 1  # the last token is never cached
    if cached > settings.max_model_len:
        raise InputError(
            f"prompt {shape.prompt_tokens:,} + output {shape.output_tokens:,} tokens exceeds "
            f"the model's context of {settings.max_model_len:,} tokens; check the point"
        )
    check_priced_steps(shape.batch, shape.prompt_tokens, engine.max_num_batched_tokens,
                       MAX_CALIBRATION_STEPS)


def check_measured(measured: Mapping[str, float], where: str) -> None:
    """Each measured metric within the range a real measurement can have."""
    for name, value in measured.items():
        low, high = MEASURED_TOK_S if name == "output_throughput_tok_s" else MEASURED_S
        if not low <= value <= high:
            unit = "tokens/s" if name == "output_throughput_tok_s" else "s"
            raise TraceError(f"{where}: measured {name} = {value:g} {unit} is outside "
                             f"[{low:g}, {high:g}] {unit}; check the units of the column")


def mapping_field(row: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """``row[key]`` when it is an object (absent = empty); TraceError otherwise."""
    value = row.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TraceError(f"{where}: '{key}' must be an object, got {value!r:.40}")
    return value


def whole_count(value: float, name: str, where: str) -> int:
    """A positive count read as a number must be whole (0.5 requests is not a count)."""
    if value != int(value):
        raise TraceError(f"{where}: '{name}' must be a whole number, got {value!r}")
    return int(value)


def on_off(value: Any, name: str) -> bool:
    """An engine switch from a file (``async_scheduling``): a JSON bool, or the text true /
    false / 1 / 0 / yes / no of a CSV cell; InputError names the field otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise InputError(f"'{name}' must be true or false, got {value!r:.40}")


def whole(value: Any, name: str) -> int:
    """An engine count from a file: an int, a whole float or its text ('2', '2.0');
    InputError names the field otherwise (infinity, 2.5, 'two', true)."""
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isascii() and text.lstrip("-").isdigit():
            return int(text)
        with contextlib.suppress(ValueError):
            value = float(text)
    if isinstance(value, float) and value.is_integer():  # False for inf and nan
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InputError(f"'{name}' must be a whole number, got {value!r:.40}")


def pick_name(in_file: Any, flag: str | None, kind: str, where: str) -> Any:
    """The model (``kind`` 'model') or GPU ('gpu') a point is priced on: the file's, or the
    flag's when the flag names one. vLLM's ``model_id`` is whatever `vllm bench serve --model`
    was given - often a local folder or a served name that cannot be resolved here - so the
    flag says what it is; a file naming another model or GPU kvplan knows is refused."""
    if in_file in (None, ""):
        return flag
    if not flag:
        return in_file
    mine, theirs = _identity(str(in_file), kind), _identity(flag, kind)
    if mine is not None and theirs is not None and mine != theirs:
        raise TraceError(f"{where}: the file's {kind} is {str(in_file)[:80]} but --{kind} "
                         f"says {flag[:80]}; drop --{kind}, or calibrate on files of that {kind}")
    return flag


def _identity(name: str, kind: str) -> str | None:
    """What a name resolves to (catalog model / GPU id), None for a path or an unknown name."""
    from pathlib import Path

    from kvplan.errors import KvplanError

    try:
        if kind == "gpu":
            from kvplan.specs.hardware import load_gpu

            return load_gpu(name).id
        if "/" in name.strip().lstrip("~")[:1] or name.endswith(".json") or Path(name).exists():
            return None  # a local folder or config.json: its name says nothing to compare
        from kvplan.specs.catalog import load_model

        return load_model(name).name.lower()
    except (KvplanError, OSError, ValueError):
        return None
