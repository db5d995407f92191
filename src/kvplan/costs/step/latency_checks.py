"""Size checks for latency pricing, done before any array is built (see kvplan.limits).

Pricing a static batch builds one array entry per request and one step per budget-full of
prompt tokens; unbounded inputs (``--batch 2147483648``, a sweep to 10^8) would allocate
gigabytes or run for hours. Each check names the flag and the allowed range.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import InputError
from kvplan.limits import (
    MAX_BATCH,
    MAX_PRICED_STEPS,
    MAX_SWEEP_STEPS,
    MAX_SWEEP_VALUES,
    MAX_TOKENS,
    check_int,
)
from kvplan.units import cdiv


def check_shape_bounds(batch: Any, prompt_tokens: Any, output_tokens: Any) -> None:
    """--batch in [1, 2^20]; --prompt, --output and their sum in [1, 10^8]."""
    check_int("--batch", batch, 1, MAX_BATCH)
    check_int("--prompt", prompt_tokens, 1, MAX_TOKENS)
    check_int("--output", output_tokens, 1, MAX_TOKENS)
    if prompt_tokens + output_tokens > MAX_TOKENS:
        raise InputError(f"--prompt + --output = {prompt_tokens + output_tokens:,} tokens; use "
                         f"at most {MAX_TOKENS:,}")


def prefill_step_count(batch: int, prompt_tokens: int, budget: int | None) -> int:
    """Steps of ``budget`` tokens that batch x prompt tokens take (one when unlimited)."""
    return 1 if budget is None else cdiv(batch * prompt_tokens, budget)


def check_priced_steps(batch: int, prompt_tokens: int, budget: int | None,
                       limit: int = MAX_PRICED_STEPS) -> None:
    """The prefill of batch x prompt tokens in steps of ``budget`` tokens: at most ``limit``
    steps (each priced step costs ~35 us, so 10^5 steps are ~3.5 s)."""
    steps = prefill_step_count(batch, prompt_tokens, budget)
    if steps > limit:
        raise InputError(
            f"--batch {batch:,} x --prompt {prompt_tokens:,} in steps of "
            f"--max-num-batched-tokens {budget:,} is {steps:,} prefill steps; kvplan prices at "
            f"most {limit:,} (raise --max-num-batched-tokens or lower --batch)"
        )


def check_sweep_steps(shapes: list[tuple[int, int, int | None]]) -> None:
    """All rows of a sweep together: at most MAX_SWEEP_STEPS priced prefill steps."""
    total = sum(prefill_step_count(*shape) for shape in shapes)
    if total > MAX_SWEEP_STEPS:
        raise InputError(
            f"this --sweep prices {total:,} prefill steps in all; kvplan prices at most "
            f"{MAX_SWEEP_STEPS:,} (fewer or smaller values, or raise --max-num-batched-tokens)"
        )


def check_sweep_size(values: list[str]) -> None:
    """A sweep prices one batch per value: at most 64 values."""
    if len(values) > MAX_SWEEP_VALUES:
        raise InputError(f"--sweep has {len(values):,} values; give at most {MAX_SWEEP_VALUES}")
