"""Workload flags (`vllm bench serve`'s) -> a Workload; dataset names; re-exports the types."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.errors import InputError, UnknownNameError
from kvplan.specs.requests.arrays import RequestSpec, Workload
from kvplan.specs.requests.bounds import (
    DRAWN_ADVICE,
    check_arrival_span,
    check_trace_size,
    check_workload_bounds,
)
from kvplan.specs.requests.generators import (
    PREFIX_HASH_BLOCK_TOKENS,
    drawn_workload,
    gamma_arrivals,
    length_bounds,
    random_lengths,
    random_workload,
    shared_prefix_hashes,
    synthetic_workload,
    vllm_arrival_rng,
)
from kvplan.specs.requests.lax_fields import FieldError, as_float, as_int, as_path, as_str, optional

if TYPE_CHECKING:  # traces (csv, their formats) are imported when a trace is read
    from kvplan.specs.requests.traces import Trace

__all__ = ["DATASETS", "DEFAULT_NUM_PROMPTS", "LENGTH_TRACES", "PREFIX_HASH_BLOCK_TOKENS",
           "TIMED_TRACES", "RequestSpec", "Workload", "WorkloadArgs", "build_workload",
           "dataset_names", "gamma_arrivals", "length_bounds", "random_lengths",
           "random_workload", "replays_trace_times", "shared_prefix_hashes",
           "synthetic_workload", "trace_rows", "workload_from_trace"]

TIMED_TRACES = ("azure-code", "azure-conv", "mooncake-conversation", "mooncake-synthetic")
LENGTH_TRACES = ("sharegpt", "sharegpt-multiturn", "arxiv-summarization", "bwb")
DATASETS = ("random", *TIMED_TRACES, *LENGTH_TRACES)
DEFAULT_NUM_PROMPTS = 1000  # vllm bench serve's --num-prompts default


# --- user-facing arguments ----------------------------------------------------------------------

_FLAGS = {
    "dataset": "--dataset",
    "trace": "--trace",
    "trace_columns": "--trace-columns",
    "num_prompts": "--num-prompts",
    "random_input_len": "--random-input-len",
    "random_output_len": "--random-output-len",
    "random_range_ratio": "--random-range-ratio",
    "random_prefix_len": "--random-prefix-len",
    "request_rate": "--request-rate",
    "burstiness": "--burstiness",
    "max_concurrency": "--max-concurrency",
    "time_scale": "--time-scale",
    "seed": "--seed",
}


_FIELDS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "dataset": (optional(as_str), None),
    "trace": (optional(lambda v: _trace_path(v)), None),
    "trace_columns": (optional(as_str), None),
    "num_prompts": (optional(as_int), None),
    "random_input_len": (as_int, 1024),
    "random_output_len": (as_int, 128),
    "random_range_ratio": (as_float, 0.0),
    "random_prefix_len": (as_int, 0),
    "request_rate": (optional(as_float), None),
    "burstiness": (as_float, 1.0),
    "max_concurrency": (optional(as_int), None),
    "time_scale": (as_float, 1.0),
    "seed": (as_int, 0),
}
"""Each field's lax coercion (pydantic's lax mode: "5" -> 5, 20 -> 20.0) and its default."""


@dataclass(frozen=True, init=False)
class WorkloadArgs:
    """The workload flags of `vllm bench serve` (and kvplan's trace flags), validated.

    Construction raises InputError / UnknownNameError with one line naming the flag.
    ``request_rate=None`` means the dataset's own arrivals: the trace's timestamps, or all at
    t=0 for `random` and length-only traces (vLLM's default, inf). ``time_scale`` multiplies a
    timed trace's arrival times: 2 replays twice as slow, 0.5 twice as fast (SGLang's
    --mooncake-slowdown-factor meaning). Values are coerced as pydantic's lax mode would
    (``dataclasses.replace`` makes a changed copy).
    """

    dataset: str | None = None
    trace: Path | None = None
    trace_columns: str | None = None
    num_prompts: int | None = None
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    request_rate: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    time_scale: float = 1.0
    seed: int = 0

    def __init__(self, **data: Any) -> None:
        for field, (coerce, default) in _FIELDS.items():
            value = data.get(field, default)
            try:
                object.__setattr__(self, field, coerce(value))
            except FieldError as exc:
                raise InputError(f"{_FLAGS[field]}: {exc}, got {value!r}") from None
        unknown = [k for k in data if k not in _FIELDS]
        if unknown:
            raise InputError(f"unknown workload option '{unknown[0]}'; use one of "
                             f"{', '.join(_FLAGS)}")
        _check_source(self)
        check_workload_bounds(self)
        _check_counts(self)
        _check_rates(self)
        _check_random_flags(self)

    @property
    def dataset_name(self) -> str:
        """The dataset actually used: the --dataset name, 'random', or the --trace file's stem."""
        if self.trace is not None:
            return self.trace.stem
        return self.dataset if self.dataset is not None else "random"

    @property
    def is_timed(self) -> bool:
        """A trace with arrival times of its own (a --trace file may lack them when read)."""
        return self.dataset_name in TIMED_TRACES or (
            self.trace is not None and _names_arrival(self.trace_columns)
        )

    @property
    def has_own_arrivals(self) -> bool:
        """True when arrivals come from the trace (timed dataset and no --request-rate)."""
        return self.is_timed and self.request_rate is None


def _trace_path(value: Any) -> Path:
    """--trace's file; an empty path (an unset shell variable) is refused by name, not read
    as Path('') = '.', the working folder."""
    if isinstance(value, str) and not value.strip():
        raise InputError("--trace is empty: give a CSV or JSONL trace file")
    return as_path(value)


def _names_arrival(trace_columns: str | None) -> bool:
    """Whether --trace-columns maps an arrival column (None: the layout read from the header
    may have one); spaces around '=' are allowed there, as the parser allows them."""
    if trace_columns is None:
        return True
    return any(item.partition("=")[0].strip() == "arrival" for item in trace_columns.split(","))


def _check_source(a: WorkloadArgs) -> None:
    if a.trace is not None and a.dataset is not None:
        raise InputError("give either --dataset NAME or --trace FILE, not both")
    if a.trace is None and a.trace_columns is not None:
        raise InputError("--trace-columns needs --trace FILE")
    if a.trace is None:
        check_dataset(a.dataset_name)


def check_dataset(name: str, *, trace_flag: bool = True) -> None:
    """UnknownNameError unless ``name`` is a --dataset; ``trace_flag``: the command also takes
    --trace FILE (`kvplan report` and the web page take bundled datasets only)."""
    if name in DATASETS:
        return
    import difflib  # a mistyped name only

    close = difflib.get_close_matches(name.lower(), DATASETS, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise UnknownNameError(f"unknown dataset '{name}': {hint}choose one of "
                           f"{', '.join(DATASETS)}" + (", or pass --trace FILE" if trace_flag
                                                        else ""))


def _check_counts(a: WorkloadArgs) -> None:
    _at_least("--num-prompts", a.num_prompts, 1)
    _at_least("--random-input-len", a.random_input_len, 0)  # 0: the prefix alone (vLLM)
    _at_least("--random-output-len", a.random_output_len, 1)
    _at_least("--random-prefix-len", a.random_prefix_len, 0)
    _at_least("--max-concurrency", a.max_concurrency, 1)
    if not 0.0 <= a.random_range_ratio < 1.0:
        raise InputError(f"--random-range-ratio must be in [0, 1), got {a.random_range_ratio}")
    low, _ = length_bounds(a.random_input_len, a.random_range_ratio)
    if a.random_prefix_len + low < 1:
        raise InputError(
            f"--random-input-len {a.random_input_len} with --random-range-ratio "
            f"{a.random_range_ratio} can draw 0-token prompts; raise the length, lower the "
            "ratio or give a shared --random-prefix-len"
        )


def _at_least(flag: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        raise InputError(f"{flag} must be a whole number >= {minimum}, got {value}")


def _check_rates(a: WorkloadArgs) -> None:
    if a.request_rate is not None and not a.request_rate > 0:
        raise InputError(f"--request-rate must be > 0 requests/s or inf, got {a.request_rate}")
    if not a.burstiness > 0:
        raise InputError(f"--burstiness must be > 0 (1 = Poisson), got {a.burstiness}")
    if not (a.time_scale > 0 and math.isfinite(a.time_scale)):
        raise InputError(f"--time-scale must be a finite number > 0, got {a.time_scale}")
    if a.time_scale != 1.0 and not a.has_own_arrivals:
        if a.request_rate is not None and a.is_timed:
            raise InputError("--time-scale rescales a trace's own arrival times, and "
                             "--request-rate replaces them with drawn ones; drop one of the two")
        raise InputError(
            "--time-scale only rescales a trace's own arrival times; "
            "use --request-rate for random and length-only datasets"
        )
    rate = a.request_rate if a.request_rate is not None else math.inf
    if a.burstiness != 1.0 and (math.isinf(rate) or a.has_own_arrivals):
        raise InputError(
            "--burstiness shapes arrivals drawn at --request-rate; give a finite --request-rate too"
        )


def _check_random_flags(a: WorkloadArgs) -> None:
    if a.dataset_name == "random" and a.trace is None:
        return
    for field in (
        "random_input_len",
        "random_output_len",
        "random_range_ratio",
        "random_prefix_len",
    ):
        if getattr(a, field) != _FIELDS[field][1]:
            raise InputError(
                f"{_FLAGS[field]} applies only to --dataset random, not to '{a.dataset_name}'"
            )


# --- building -----------------------------------------------------------------------------------


def build_workload(args: WorkloadArgs, rng: np.random.Generator | None = None) -> Workload:
    """The workload `vllm bench serve` would send for ARGS (default: lengths from
    default_rng(--seed), arrivals from vLLM's legacy stream ``vllm_arrival_rng(--seed)``; an
    ``rng`` given draws both; made only where it draws: a trace's own arrivals need no
    numpy.random import)."""
    rate = args.request_rate if args.request_rate is not None else math.inf
    if args.trace is None and args.dataset_name == "random":
        w = _random(args, rate, rng)
        check_arrival_span(w.name, w.duration_s, DRAWN_ADVICE)
        return w
    trace = _load_for(args)
    _note_sharegpt_seed(args)
    if args.time_scale != 1.0 and trace.arrival_s is None:  # a --trace file without times
        raise InputError(f"--time-scale rescales a trace's own arrival times and '{trace.name}' "
                         "has none; use --request-rate to draw arrivals")
    n = _take(trace, args.num_prompts, _default_prompts(args))
    own = trace.arrival_s if args.has_own_arrivals else None
    if own is not None:
        arrivals = own[:n] * args.time_scale
    else:
        arrivals = gamma_arrivals(n, rate, args.burstiness,
                                  rng if rng is not None else vllm_arrival_rng(args.seed))
    check_arrival_span(trace.name, float(arrivals[-1]) if n else 0.0,
                       *(() if own is not None else (DRAWN_ADVICE,)))
    return workload_from_trace(trace, n, arrivals, args.max_concurrency)


def _random(args: WorkloadArgs, rate: float, rng: np.random.Generator | None) -> Workload:
    """The random dataset: its draws from the cache (specs/requests/random_cache.py) where
    the same seeded run was drawn before, else drawn (and kept) here."""
    from kvplan.specs.requests import random_cache

    n = args.num_prompts or DEFAULT_NUM_PROMPTS
    params = (n, args.random_input_len, args.random_output_len, float(args.random_range_ratio),
              args.random_prefix_len, float(rate), float(args.burstiness), args.seed)
    entry = None if rng is not None or args.seed is None else random_cache.entry_for(params)
    draws = None if entry is None else random_cache.load(entry)
    if draws is not None:
        return drawn_workload(draws, args.random_prefix_len, args.max_concurrency)
    w = random_workload(
        num_prompts=n, input_len=args.random_input_len, output_len=args.random_output_len,
        range_ratio=args.random_range_ratio, prefix_len=args.random_prefix_len,
        request_rate=rate, burstiness=args.burstiness, max_concurrency=args.max_concurrency,
        rng=rng if rng is not None else np.random.default_rng(args.seed),
        arrival_rng=None if rng is not None else vllm_arrival_rng(args.seed))
    if entry is not None:
        random_cache.save(entry, random_cache.Draws(w.prompt_tokens, w.output_tokens,
                                                    w.arrival_s))
    return w


def _note_sharegpt_seed(args: WorkloadArgs) -> None:
    """`sharegpt` is vLLM's --seed 0 sample: another seed there samples other conversations
    (ShareGPTDataset shuffles with random.seed(--seed)), here it moves only the arrivals."""
    if args.trace is None and args.dataset_name == "sharegpt" and args.seed != 0:
        from kvplan.notes import note

        drawn = args.request_rate is not None and not math.isinf(args.request_rate)
        note("sharegpt's requests are those vllm bench serve --seed 0 sends (kvplan bundles "
             "that sample); --seed %d changes %s here, while vllm bench serve --seed %d also "
             "samples other conversations", args.seed, "only the arrival times" if drawn
             else "nothing (every request at t = 0)", args.seed)


def _load_for(args: WorkloadArgs) -> Trace:
    from kvplan.specs.requests.traces import load_csv_trace, load_trace

    if args.trace is None:
        return load_trace(args.dataset_name)
    return load_csv_trace(args.trace, args.trace_columns)


def replays_trace_times(args: WorkloadArgs) -> bool:
    """Whether ARGS's arrivals are its trace's own times (a --trace file read for it may
    have none: then they are drawn, as for a length-only dataset)."""
    if not args.has_own_arrivals:
        return False
    return args.trace is None or _load_for(args).arrival_s is not None


def trace_rows(args: WorkloadArgs) -> int:
    """Requests in the trace ARGS reads (every row, whatever --num-prompts takes)."""
    return len(_load_for(args))


def _default_prompts(args: WorkloadArgs) -> int | None:
    """A bundled dataset's own default (sharegpt: vLLM's 1000); None = the whole trace."""
    from kvplan.specs.requests.traces import BUNDLED_TRACES

    return None if args.trace is not None else BUNDLED_TRACES[args.dataset_name].default_num_prompts


def _take(trace: Trace, num_prompts: int | None, default: int | None) -> int:
    """Requests taken: --num-prompts, else the dataset's DEFAULT, else every row."""
    if num_prompts is None and default is None:
        check_trace_size(trace.name, len(trace))
        return len(trace)
    n = num_prompts if num_prompts is not None else default
    assert n is not None
    if n > len(trace):
        omit = " or omit it to use all" if default is None else ""
        raise InputError(
            f"--num-prompts {n} is more than the {len(trace):,} requests "
            f"in '{trace.name}'; give at most {len(trace)}{omit}"
        )
    return n


def workload_from_trace(
    trace: Trace, n: int, arrival_s: np.ndarray, max_concurrency: int | None = None
) -> Workload:
    """The first N requests of TRACE with the given arrival times."""
    hashes = trace.prefix_hashes[:n] if trace.prefix_hashes is not None else None
    return Workload(
        name=trace.name,
        arrival_s=arrival_s,
        prompt_tokens=trace.prompt_tokens[:n],
        output_tokens=trace.output_tokens[:n],
        prefix_hashes=hashes,
        hash_block_tokens=trace.hash_block_tokens if hashes else 0,
        closed_loop_concurrency=max_concurrency,
    )


def dataset_names() -> tuple[str, ...]:
    """Every --dataset name, in the order docs/workloads.md lists them."""
    from kvplan.specs.requests.traces import BUNDLED_TRACES

    assert set(TIMED_TRACES + LENGTH_TRACES) == set(BUNDLED_TRACES)
    return DATASETS
