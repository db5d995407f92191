"""`vllm bench serve`'s random generators: lengths, Gamma/Poisson arrivals, shared prefixes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kvplan.specs.requests.arrays import Workload
from kvplan.specs.requests.random_cache import Draws

if TYPE_CHECKING:  # np.random is imported where something is drawn, not at import
    from typing import TypeAlias

    Rng: TypeAlias = np.random.Generator | np.random.RandomState

PREFIX_HASH_BLOCK_TOKENS = 16
"""vLLM's default KV block size (exported; `--random-prefix-len` hashes its whole prefix as
one block of ``prefix_len`` tokens: shared_prefix_hashes)."""


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


def vllm_arrival_rng(seed: int | None) -> np.random.RandomState:
    """The stream `vllm bench serve` draws its arrival gaps from: numpy's global legacy
    RandomState, seeded by ``np.random.seed(--seed)`` in its main_async. get_request's gammas
    are its first draws (the random dataset draws from its own default_rng(seed), ShareGPT
    shuffles with Python's random), so the same seed gives vLLM's very send times."""
    return np.random.RandomState(seed)


def gamma_arrivals(n: int, request_rate: float, burstiness: float, rng: Rng) -> np.ndarray:
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
    """Hashes for `--random-prefix-len`: one hash block of ``prefix_len`` tokens leads every
    prompt (``hash_block_tokens`` = prefix_len), so every whole KV block inside the prefix is
    shared whatever --block-size is (sim.state.trace_keys cuts it at the block boundaries; a
    partial last block holds random tokens, never cached content). 16-token hash blocks
    missed the prefix's last 8 tokens at --block-size 8 or 1 when prefix_len % 16 >= 8.

    One array is shared by all requests, so a million requests cost a million references,
    not a million arrays.
    """
    if prefix_len < 1:
        return None
    shared = np.zeros(1, dtype=np.int64)
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
    arrival_rng: Rng | None = None,
) -> Workload:
    """`vllm bench serve --dataset-name random`: lengths from ``rng``, then arrivals from
    ``arrival_rng`` (vLLM: ``vllm_arrival_rng(seed)``; None: the same ``rng``)."""
    prompts, outputs = random_lengths(
        num_prompts, input_len, output_len, range_ratio, prefix_len, rng
    )
    arrivals = gamma_arrivals(num_prompts, request_rate, burstiness,
                              rng if arrival_rng is None else arrival_rng)
    return drawn_workload(Draws(prompts, outputs, arrivals), prefix_len, max_concurrency)


def drawn_workload(d: Draws, prefix_len: int, max_concurrency: int | None) -> Workload:
    """The random dataset's workload from its draws (the prefix hashes draw nothing)."""
    hashes = shared_prefix_hashes(len(d.prompts), prefix_len)
    return Workload(
        name="random",
        arrival_s=d.arrivals,
        prompt_tokens=d.prompts,
        output_tokens=d.outputs,
        prefix_hashes=hashes,
        hash_block_tokens=prefix_len if hashes else 0,
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
