"""Size checks for latency pricing, done before any array is built (see kvplan.limits).

Pricing a static batch builds one array entry per request and one step per budget-full of
prompt tokens; unbounded inputs (``--batch 2147483648``, a sweep to 10^8) would allocate
gigabytes or run for hours. Each check names the flag and the allowed range.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import InputError
from kvplan.limits import MAX_BATCH, MAX_PRICED_STEPS, MAX_SWEEP_VALUES, MAX_TOKENS, check_int
from kvplan.units import cdiv


def check_shape_bounds(batch: Any, prompt_tokens: Any, output_tokens: Any) -> None:
    """--batch in [1, 2^20]; --prompt, --output and their sum in [1, 10^8]."""
    check_int("--batch", batch, 1, MAX_BATCH)
    check_int("--prompt", prompt_tokens, 1, MAX_TOKENS)
    check_int("--output", output_tokens, 1, MAX_TOKENS)
    if prompt_tokens + output_tokens > MAX_TOKENS:
        raise InputError(f"--prompt + --output = {prompt_tokens + output_tokens:,} tokens; use "
                         f"at most {MAX_TOKENS:,}")


def check_priced_steps(batch: int, prompt_tokens: int, budget: int | None) -> None:
    """The prefill of batch x prompt tokens in steps of ``budget`` tokens: at most 10^6 steps."""
    steps = 1 if budget is None else cdiv(batch * prompt_tokens, budget)
    if steps > MAX_PRICED_STEPS:
        raise InputError(
            f"--batch {batch:,} x --prompt {prompt_tokens:,} in steps of "
            f"--max-num-batched-tokens {budget:,} is {steps:,} prefill steps; kvplan prices at "
            f"most {MAX_PRICED_STEPS:,} (raise --max-num-batched-tokens or lower --batch)"
        )


def check_sweep_size(values: list[str]) -> None:
    """A sweep prices one batch per value: at most 64 values."""
    if len(values) > MAX_SWEEP_VALUES:
        raise InputError(f"--sweep has {len(values):,} values; give at most {MAX_SWEEP_VALUES}")
