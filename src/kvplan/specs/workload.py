"""Workloads as struct-of-arrays, with `vllm bench serve`'s generators and dataset names."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from kvplan.errors import InputError, KvplanError, UnknownNameError
from kvplan.specs.traces import BUNDLED_TRACES, Trace, load_csv_trace, load_trace

PREFIX_HASH_BLOCK_TOKENS = 16
"""Tokens per hash block for `--random-prefix-len` (vLLM's default KV block size)."""

TIMED_TRACES = ("azure-code", "azure-conv", "mooncake-conversation", "mooncake-synthetic")
LENGTH_TRACES = ("sharegpt", "arxiv-summarization", "bwb")
DATASETS = ("random", *TIMED_TRACES, *LENGTH_TRACES)
DEFAULT_NUM_PROMPTS = 1000  # vllm bench serve's --num-prompts default


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSpec:
    """One request, for reading and tests; the simulator reads Workload's arrays directly."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_hashes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Workload:
    """N requests as parallel read-only arrays (8 bytes x 3 per request without hashes).

    ``prefix_hashes[i][k]`` names the content of prompt tokens ``[k*H, (k+1)*H)`` of request i
    and, being a prefix hash, of every token before them (H = ``hash_block_tokens``); tokens past
    the listed blocks are unique to the request. Equal ids = shareable KV (prefix caching)::

        request 0:  [ 0 ][ 1 ][ 2 ][ 3 ]..      ids 0, 1 shared -> 2*H tokens can hit the cache
        request 1:  [ 0 ][ 1 ][ 7 ]..
    """

    name: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_hashes: tuple[np.ndarray, ...] | None = None
    hash_block_tokens: int = 0
    closed_loop_concurrency: int | None = None

    def __post_init__(self) -> None:
        for field, dtype in (
            ("arrival_s", np.float64),
            ("prompt_tokens", np.int64),
            ("output_tokens", np.int64),
        ):
            object.__setattr__(self, field, _frozen_array(getattr(self, field), dtype))
        _check_workload(self)

    def __len__(self) -> int:
        return int(self.prompt_tokens.shape[0])

    def request(self, i: int) -> RequestSpec:
        """Request i as a small value object."""
        hashes = self.prefix_hashes[i].tolist() if self.prefix_hashes is not None else []
        return RequestSpec(
            request_id=i,
            arrival_s=float(self.arrival_s[i]),
            prompt_tokens=int(self.prompt_tokens[i]),
            output_tokens=int(self.output_tokens[i]),
            prefix_hashes=tuple(hashes),
        )

    def requests(self) -> Iterator[RequestSpec]:
        """Every request in arrival order (slow for millions; use the arrays there)."""
        return (self.request(i) for i in range(len(self)))

    @property
    def duration_s(self) -> float:
        """Seconds from t=0 to the last arrival (0 for an offline batch)."""
        return float(self.arrival_s[-1]) if len(self) else 0.0

    @property
    def is_offline(self) -> bool:
        """True when every request arrives at t=0 (request rate inf)."""
        return not bool(np.any(self.arrival_s))


def _frozen_array(values: Any, dtype: type[np.generic]) -> np.ndarray:
    array = np.asarray(values, dtype=dtype)
    if array.flags.writeable:
        array = array.copy() if array.base is not None or array is values else array
        array.setflags(write=False)
    return array


def _check_workload(w: Workload) -> None:
    n = len(w)
    if w.arrival_s.shape != (n,) or w.output_tokens.shape != (n,):
        raise InputError(f"workload '{w.name}': arrival, prompt and output arrays differ in length")
    if n and not (np.all(np.isfinite(w.arrival_s)) and w.arrival_s[0] >= 0):
        raise InputError(f"workload '{w.name}': arrival times must be finite seconds >= 0")
    if n and bool(np.any(np.diff(w.arrival_s) < 0)):
        raise InputError(f"workload '{w.name}': arrival times must be sorted ascending")
    if n and (w.prompt_tokens.min() < 1 or w.output_tokens.min() < 1):
        raise InputError(f"workload '{w.name}': every prompt and output needs >= 1 token")
    _check_hashes(w, n)
    if w.closed_loop_concurrency is not None and w.closed_loop_concurrency < 1:
        raise InputError("--max-concurrency must be a positive whole number")


def _check_hashes(w: Workload, n: int) -> None:
    if w.prefix_hashes is None:
        return
    if len(w.prefix_hashes) != n:
        raise InputError(f"workload '{w.name}': prefix_hashes needs one array per request")
    if w.hash_block_tokens < 1:
        raise InputError(f"workload '{w.name}': prefix_hashes needs hash_block_tokens >= 1")


# --- generators ---------------------------------------------------------------------------------


def length_bounds(length: int, range_ratio: float, *, floor_at: int = 0) -> tuple[int, int]:
    """vLLM RandomDataset's inclusive range: [floor(len*(1-r)), ceil(len*(1+r))], low >= floor_at.

    E.g. 1024 tokens with r=0.1 -> [921, 1127]; output lengths use floor_at=1.
    """
    low = math.floor(length * (1 - range_ratio))
    high = math.ceil(length * (1 + range_ratio))
    return max(low, floor_at), max(high, floor_at)


def random_lengths(
    n: int,
    input_len: int,
    output_len: int,
    range_ratio: float,
    prefix_len: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths, uniform integers drawn in vLLM's order (inputs, then outputs).

    The prompt is ``prefix_len`` shared tokens plus the sampled input length, as in vLLM (which
    also subtracts the tokenizer's special tokens from input_len; kvplan has no tokenizer).
    """
    in_low, in_high = length_bounds(input_len, range_ratio)
    out_low, out_high = length_bounds(output_len, range_ratio, floor_at=1)
    inputs = rng.integers(in_low, in_high + 1, size=n, dtype=np.int64)
    outputs = rng.integers(out_low, out_high + 1, size=n, dtype=np.int64)
    return inputs + prefix_len, outputs


def gamma_arrivals(
    n: int, request_rate: float, burstiness: float, rng: np.random.Generator
) -> np.ndarray:
    """Arrival times as `vllm bench serve` sends them (its get_request without ramp-up).

    Gaps are Gamma(shape=burstiness, scale=1/(rate*burstiness)): mean 1/rate, coefficient of
    variation 1/sqrt(burstiness) (1 = Poisson, < 1 burstier, inf = evenly spaced). Their running
    sum is then rescaled so the last request arrives at exactly n/rate, as vLLM does; the first
    arrives after one gap, not at 0. rate = inf -> every request at t=0.
    """
    if math.isinf(request_rate) or n == 0:
        return np.zeros(n)
    if math.isinf(burstiness):  # constant gaps 1/rate; computed directly, exact
        return np.arange(1, n + 1) / request_rate
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=n)
    arrivals = np.cumsum(gaps)
    if arrivals[-1] > 0:
        arrivals *= (n / request_rate) / arrivals[-1]
    return arrivals


def shared_prefix_hashes(n: int, prefix_len: int) -> tuple[np.ndarray, ...] | None:
    """Hashes for `--random-prefix-len`: the same full 16-token blocks lead every prompt.

    A partial last block is not listed (vLLM caches full blocks only). One array is shared by
    all requests, so a million requests cost a million references, not a million arrays.
    """
    blocks = prefix_len // PREFIX_HASH_BLOCK_TOKENS
    if blocks == 0:
        return None
    shared = np.arange(blocks, dtype=np.int64)
    shared.setflags(write=False)
    return (shared,) * n


def random_workload(
    *,
    num_prompts: int,
    input_len: int,
    output_len: int,
    rng: np.random.Generator,
    range_ratio: float = 0.0,
    prefix_len: int = 0,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
    max_concurrency: int | None = None,
) -> Workload:
    """`vllm bench serve --dataset-name random`: lengths first, then arrivals, from one rng."""
    prompts, outputs = random_lengths(
        num_prompts, input_len, output_len, range_ratio, prefix_len, rng
    )
    hashes = shared_prefix_hashes(num_prompts, prefix_len)
    return Workload(
        name="random",
        arrival_s=gamma_arrivals(num_prompts, request_rate, burstiness, rng),
        prompt_tokens=prompts,
        output_tokens=outputs,
        prefix_hashes=hashes,
        hash_block_tokens=PREFIX_HASH_BLOCK_TOKENS if hashes else 0,
        closed_loop_concurrency=max_concurrency,
    )


def synthetic_workload(
    n: int, input_len: int, output_len: int, rate: float = math.inf, seed: int = 0
) -> Workload:
    """N requests of fixed lengths with Poisson arrivals at RATE (inf = all at t=0); vectorised."""
    return random_workload(
        num_prompts=n,
        input_len=input_len,
        output_len=output_len,
        request_rate=rate,
        rng=np.random.default_rng(seed),
    )


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


class WorkloadArgs(BaseModel):
    """The workload flags of `vllm bench serve` (and kvplan's trace flags), validated.

    Construction raises InputError / UnknownNameError (never pydantic's ValidationError) with one
    line naming the flag. ``request_rate=None`` means the dataset's own arrivals: the trace's
    timestamps, or all at t=0 for `random` and length-only traces (vLLM's default, inf).
    ``time_scale`` multiplies a timed trace's arrival times: 2 replays twice as slow, 0.5 twice
    as fast (SGLang's --mooncake-slowdown-factor meaning).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

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
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _user_error(exc) from None

    @property
    def dataset_name(self) -> str:
        """The dataset actually used: the --dataset name, 'random', or the --trace file's stem."""
        if self.trace is not None:
            return self.trace.stem
        return self.dataset or "random"

    @property
    def has_own_arrivals(self) -> bool:
        """True when arrivals come from the trace (timed dataset and no --request-rate)."""
        timed = self.dataset_name in TIMED_TRACES or (
            self.trace is not None and "arrival=" in (self.trace_columns or "arrival=")
        )
        return timed and self.request_rate is None

    @model_validator(mode="after")
    def _validate(self) -> WorkloadArgs:
        _check_source(self)
        _check_counts(self)
        _check_rates(self)
        _check_random_flags(self)
        return self


def _user_error(exc: ValidationError) -> KvplanError:
    err = exc.errors()[0]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, KvplanError):
        return cause
    field = str(err["loc"][0]) if err["loc"] else ""
    if err["type"] == "extra_forbidden":
        return InputError(f"unknown workload option '{field}'; use one of {', '.join(_FLAGS)}")
    flag = _FLAGS.get(field, field)
    return InputError(f"{flag}: {err['msg'].lower()}, got {err['input']!r}")


def _check_source(a: WorkloadArgs) -> None:
    if a.trace is not None and a.dataset is not None:
        raise InputError("give either --dataset NAME or --trace FILE, not both")
    if a.trace is None and a.trace_columns is not None:
        raise InputError("--trace-columns needs --trace FILE")
    if a.trace is None and a.dataset_name not in DATASETS:
        close = difflib.get_close_matches(a.dataset_name, DATASETS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise UnknownNameError(
            f"unknown dataset '{a.dataset_name}': {hint}choose one of "
            f"{', '.join(DATASETS)}, or pass --trace FILE"
        )


def _check_counts(a: WorkloadArgs) -> None:
    _at_least("--num-prompts", a.num_prompts, 1)
    _at_least("--random-input-len", a.random_input_len, 1)
    _at_least("--random-output-len", a.random_output_len, 1)
    _at_least("--random-prefix-len", a.random_prefix_len, 0)
    _at_least("--max-concurrency", a.max_concurrency, 1)
    if not 0.0 <= a.random_range_ratio < 1.0:
        raise InputError(f"--random-range-ratio must be in [0, 1), got {a.random_range_ratio}")
    low, _ = length_bounds(a.random_input_len, a.random_range_ratio)
    if a.random_prefix_len + low < 1:
        raise InputError(
            f"--random-input-len {a.random_input_len} with --random-range-ratio "
            f"{a.random_range_ratio} can draw 0-token prompts; raise the length or lower the ratio"
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
    defaults = WorkloadArgs.model_fields
    for field in (
        "random_input_len",
        "random_output_len",
        "random_range_ratio",
        "random_prefix_len",
    ):
        if getattr(a, field) != defaults[field].default:
            raise InputError(
                f"{_FLAGS[field]} applies only to --dataset random, not to '{a.dataset_name}'"
            )


# --- building -----------------------------------------------------------------------------------


def build_workload(args: WorkloadArgs, rng: np.random.Generator | None = None) -> Workload:
    """The workload `vllm bench serve` would send for ARGS (default rng: seeded by --seed)."""
    rng = rng if rng is not None else np.random.default_rng(args.seed)
    rate = args.request_rate if args.request_rate is not None else math.inf
    if args.trace is None and args.dataset_name == "random":
        return random_workload(
            num_prompts=args.num_prompts or DEFAULT_NUM_PROMPTS,
            input_len=args.random_input_len,
            output_len=args.random_output_len,
            range_ratio=args.random_range_ratio,
            prefix_len=args.random_prefix_len,
            request_rate=rate,
            burstiness=args.burstiness,
            max_concurrency=args.max_concurrency,
            rng=rng,
        )
    trace = _load_for(args)
    n = _take(trace, args.num_prompts)
    if args.has_own_arrivals and trace.arrival_s is not None:
        arrivals = trace.arrival_s[:n] * args.time_scale
    else:
        arrivals = gamma_arrivals(n, rate, args.burstiness, rng)
    return workload_from_trace(trace, n, arrivals, args.max_concurrency)


def _load_for(args: WorkloadArgs) -> Trace:
    if args.trace is None:
        return load_trace(args.dataset_name)
    return load_csv_trace(args.trace, args.trace_columns)


def _take(trace: Trace, num_prompts: int | None) -> int:
    if num_prompts is None:
        return len(trace)
    if num_prompts > len(trace):
        raise InputError(
            f"--num-prompts {num_prompts} is more than the {len(trace):,} requests "
            f"in '{trace.name}'; give at most {len(trace)} or omit it to use all"
        )
    return num_prompts


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
    assert set(TIMED_TRACES + LENGTH_TRACES) == set(BUNDLED_TRACES)
    return DATASETS
