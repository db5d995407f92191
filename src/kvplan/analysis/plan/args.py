"""The plan command's flag text -> kvplan.plan() arguments (comma lists, SLOs, workload)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kvplan.errors import InputError

T = TypeVar("T")


def comma_list(flag: str, text: str, parse: Callable[[str], T]) -> tuple[T, ...]:
    """``"1,2,4"`` -> (1, 2, 4); an empty item or list is an error naming the flag."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise InputError(f"{flag} {text!r}: give a comma list with no empty items, e.g. 1,2,4")
    out = []
    for x in items:
        try:
            out.append(parse(x))
        except InputError:
            raise
        except (ValueError, KeyError):
            raise InputError(f"{flag}: {x!r} is not a valid value") from None
    return tuple(out)


DEFAULT_CHUNK_TEXT = "512,2048,default"
"""--max-num-batched-tokens when not given (plan_space.DEFAULT_CHUNKS)."""

FlagParser = Callable[[str, str], Any]
"""(EngineConfig field, text) -> value; the CLI passes cli/flags.parse_flag (its messages);
without one (the web form), token counts are read as vLLM reads them (8k, 32K, ...) and the
rest as plain whole numbers."""

TOKEN_FIELDS = ("max_model_len", "max_num_batched_tokens")
"""The flags vLLM reads with human_readable_int (8k = 8,000, 8K = 8,192)."""


def _whole(field: str, text: str) -> int:
    from kvplan.units import human_readable_int

    if not isinstance(text, str):  # a number from a JSON body
        return int(text)
    return human_readable_int(text) if field in TOKEN_FIELDS else int(text)


def _engine(field: str, parse: FlagParser) -> Callable[[str], Any]:
    """One value of an engine flag, parsed by ``parse``."""
    return lambda x: parse(field, x)


def _max_model_len(text: str, parse: FlagParser) -> Any:
    """--max-model-len (one value, not a list): refused in the CLI's words, flag first."""
    try:
        return parse("max_model_len", text)
    except InputError:
        raise
    except (ValueError, KeyError) as exc:
        raise InputError(f"--max-model-len {exc}") from None


def _or_default(field: str, parse: FlagParser) -> Callable[[str], Any]:
    one = _engine(field, parse)
    return lambda x: None if x.lower() == "default" else one(x)


def _on_off(x: str) -> bool:
    return {"on": True, "true": True, "off": False, "false": False}[x.lower()]


def space_options(a: dict[str, Any], parse: FlagParser = _whole) -> dict[str, Any]:
    """Search-space lists from the flags (None where the default space applies)."""
    return {
        "gpus": None if a["gpu"] is None else comma_list("--gpu", a["gpu"], str),
        "tensor_parallel_sizes": None if a["tp"] is None else comma_list(
            "--tensor-parallel-size", a["tp"], _engine("tensor_parallel_size", parse)),
        "pipeline_parallel_sizes": comma_list("--pipeline-parallel-size", a["pp"],
                                              _engine("pipeline_parallel_size", parse)),
        "kv_cache_dtypes": comma_list("--kv-cache-dtype", a["kv_cache_dtype"], str),
        "quantizations": comma_list("--quantization", a["quantization"],
                                    lambda x: None if x.lower() == "none" else x),
        "max_num_seqs": comma_list("--max-num-seqs", a["max_num_seqs"],
                                   _or_default("max_num_seqs", parse)),
        "max_num_batched_tokens": comma_list("--max-num-batched-tokens",
                                             a["max_num_batched_tokens"] or DEFAULT_CHUNK_TEXT,
                                             _or_default("max_num_batched_tokens", parse)),
        "block_sizes": comma_list("--block-size", a["block_size"], _engine("block_size", parse)),
        "prefix_caching": comma_list("--enable-prefix-caching", a["prefix_caching"], _on_off),
        "data_parallel_sizes": None if a.get("dp") is None else comma_list(
            "--data-parallel-size", a["dp"], _engine("data_parallel_size", parse)),
        "expert_parallel": None if a.get("ep") is None else comma_list(
            "--enable-expert-parallel", a["ep"], _on_off),
    }


def replicas_option(text: str) -> int | None:
    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"--replicas {text!r}: use auto or a whole number") from None


def price_overrides(items: list[str] | None) -> tuple[str, ...]:
    """--price items, comma lists split (H100=2.49,L40S=0.86); a decimal comma (H100=2,49)
    is refused as one, not as a price '49'."""
    out: list[str] = []
    for item in items or []:
        parts = [x.strip() for x in item.split(",") if x.strip()]
        if any(x.isdigit() for x in parts[1:]) and "=" in parts[0]:
            raise InputError(f"--price {item!r}: a comma separates prices (H100=2.49,L40S=0.86);"
                             " write the USD per GPU-hour with a decimal point, e.g. H100=2.49")
        out += parts
    return tuple(out)


GOODPUT_TARGET = 0.99
"""--goodput-target when not given (kvplan.Slo's default)."""


def slo_from(a: dict[str, Any]) -> Any:
    from kvplan.specs.slo import Slo, WarmupRule, parse_goodput_slo, parse_slo

    if not 0.0 <= a["warmup"] < 1.0:
        raise InputError(f"--warmup-fraction must be in [0, 1), got {a['warmup']}")
    target = a.get("goodput_target")
    if target is not None and not a["goodput"]:
        raise InputError("--goodput-target needs --goodput ttft:MS tpot:MS e2el:MS: it is the "
                         "share of requests that must meet those bounds")
    return Slo(bounds=parse_slo(a["slo"] or []), goodput_ms=parse_goodput_slo(a["goodput"] or []),
               goodput_target=GOODPUT_TARGET if target is None else target,
               warmup=WarmupRule(fraction=a["warmup"]))


def workload_from(a: dict[str, Any]) -> Any:
    from kvplan.specs.requests.workload import WorkloadArgs

    return WorkloadArgs(
        dataset=a["dataset"], trace=a["trace"], trace_columns=a["trace_columns"],
        num_prompts=a["num_prompts"], random_input_len=a["random_input_len"],
        random_output_len=a["random_output_len"], random_range_ratio=a["random_range_ratio"],
        request_rate=a["request_rate"], burstiness=a["burstiness"], time_scale=a["time_scale"],
        seed=a["seed"])


def plan_kwargs(a: dict[str, Any], parse_flag: FlagParser | None = None) -> dict[str, Any]:
    """Everything kvplan.plan() takes besides model, workload and SLO."""
    parse = parse_flag or _whole
    return {
        **space_options(a, parse), "gpu_memory_utilization": a["gpu_memory_utilization"],
        "max_model_len": None if a["max_model_len"] is None else _max_model_len(
            a["max_model_len"], parse),
        "replicas": replicas_option(a["replicas"]),
        "router": a["router"], "provider": a["provider"], "prices_file": a["prices"],
        "price_overrides": price_overrides(a["price"]), "max_gpus": a["max_gpus"],
        "max_cost_per_hour": a["max_cost_per_hour"], "search": a["search"],
        "executor": a["executor"], "workers": a["workers"], "ray_address": a["ray_address"],
        "seed": a["seed"], "sample_requests": a["sample_requests"], "profile": a["profile"],
        "slo_margin": a.get("slo_margin", "none"), "model_id": a.get("model_id"),
        "async_scheduling": bool(a.get("async_scheduling")),
    }
