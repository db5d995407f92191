"""A request's memory-claim schedule: prefill jump (or chunk staircase), then decode trickle.

Convention (the lesson's): a request with a P-token prompt and O output tokens ends with
P + O tokens in its cache. Prefill caches the P prompt tokens (in ceil(P/C) steps with
chunked prefill), then each of O decode steps caches one more token.

    tokens in cache  P ........ P+1 P+2 ... P+O
    step             prefill    d1  d2  ... dO
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvplan import limits
from kvplan.errors import InputError
from kvplan.specs.kv import ModelKv
from kvplan.units import cdiv

Phase = Literal["prefill", "decode"]
MAX_TOKENS = limits.MAX_TOKENS
"""Longer than any model's context by far: larger lengths are typos, not plans."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimStep:
    """The cache after one engine step of a single request."""

    step: int
    phase: Phase
    tokens_in_cache: int
    logical_bytes: int
    claimed_bytes: int
    """Logical bytes added by this step (0 once sliding windows and state stop growing)."""
    allocated_blocks: int
    """vLLM's blocks held during the step, summed over its KV cache groups (a block spans
    every layer of its group, padding layers included: ``ModelKv.blocks_for``). Sliding
    windows free on the tokens computed before the step (vLLM's allocate_slots), so a prefill
    step holds every block it writes until the next step."""
    allocated_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTimeline:
    """A request's whole claim schedule and its totals."""

    prompt_tokens: int
    output_tokens: int
    chunk_tokens: int | None
    block_size: int
    steps: tuple[ClaimStep, ...]
    tensor_parallel_size: int = 1
    """Bytes are one GPU's share at this TP degree (the whole model's at 1)."""

    @property
    def prefill_steps(self) -> int:
        return sum(1 for s in self.steps if s.phase == "prefill")

    @property
    def prefill_bytes(self) -> int:
        """Logical bytes held when prefill ends (includes fixed state of hybrid layers)."""
        return self.steps[self.prefill_steps - 1].logical_bytes

    @property
    def final_bytes(self) -> int:
        return self.steps[-1].logical_bytes

    @property
    def decode_bytes(self) -> int:
        return self.final_bytes - self.prefill_bytes

    @property
    def prefill_share(self) -> float:
        return self.prefill_bytes / self.final_bytes

    @property
    def final_allocated_bytes(self) -> int:
        return self.steps[-1].allocated_bytes

    @property
    def vllm_final(self) -> ClaimStep:
        """Where vLLM's request ends: its prefill step samples the first output token and the
        last one is never fed back, so O - 1 decode steps cache P + O - 1 tokens (the
        schedule above, the lesson's, runs one decode step per output token)."""
        return self.steps[-2] if self.output_tokens else self.steps[-1]


def request_timeline(
    kv: ModelKv,
    prompt_tokens: int,
    output_tokens: int,
    *,
    chunk_tokens: int | None = None,
    block_size: int = 16,
    max_tokens: int | None = None,
) -> RequestTimeline:
    """Step-by-step claim schedule of one request (see the module docstring for conventions).

    ``max_tokens``: the model's context (max_position_embeddings); a longer request is refused
    before one step per token is built."""
    from kvplan.costs.memory.kv_dtype_check import check_mla_latent

    _check_lengths(prompt_tokens, output_tokens, chunk_tokens, block_size)
    check_mla_latent(kv)
    _check_context(prompt_tokens + output_tokens, max_tokens)
    _check_steps(prompt_tokens, output_tokens, chunk_tokens)
    kv, block_size = hybrid_block_layout(kv, block_size)
    tokens = _tokens_after_each_step(prompt_tokens, output_tokens, chunk_tokens)
    n_prefill = 1 if chunk_tokens is None else cdiv(prompt_tokens, chunk_tokens)
    steps, previous, before = [], 0, 0
    for i, held in enumerate(tokens):
        logical = kv.bytes_for(held)
        steps.append(
            ClaimStep(
                step=i + 1,
                phase="prefill" if i < n_prefill else "decode",
                tokens_in_cache=held,
                logical_bytes=logical,
                claimed_bytes=logical - previous,
                allocated_blocks=kv.blocks_for(held, block_size, before),
                allocated_bytes=kv.allocated_bytes_for(held, block_size, before),
            )
        )
        previous, before = logical, held
    return RequestTimeline(
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        chunk_tokens=chunk_tokens,
        block_size=block_size,
        steps=tuple(steps),
        tensor_parallel_size=kv.tensor_parallel_size,
    )


def hybrid_block_layout(kv: ModelKv, block_size: int) -> tuple[ModelKv, int]:
    """The block vLLM 0.11 runs whatever the GPU. It raises a hybrid (attention + state)
    model's attention block until one attention page holds a state page, and pads the state
    page to it (``HybridAttentionMambaModelConfig``; ``kvplan capacity`` logs it): Qwen3-Next
    at TP1 allocates blocks of 544 tokens, not 16. DeepSeek-V3.2 (sparse MLA) runs blocks of
    64 on every GPU (``sparse_mla_block``). Other models keep ``block_size``."""
    from dataclasses import replace

    from kvplan.costs.memory.kv_groups import hybrid_block
    from kvplan.specs.kv_state import StateSpec

    sparse = sparse_mla_block(kv, block_size)
    if sparse is not None:
        return kv, sparse
    hb = hybrid_block([g.spec for g in kv.groups], block_size)
    if hb is None:
        return kv, block_size
    if hb.block_size != block_size:
        from kvplan.notes import note

        note("%s: vLLM sets the attention block size to %d tokens so that an attention page "
             "holds a state page (blocks of %d asked for)", kv.model, hb.block_size, block_size)
    groups = tuple(replace(g, spec=replace(g.spec, page_size_padded=hb.page_size_padded))
                   if isinstance(g.spec, StateSpec) else g for g in kv.groups)
    return replace(kv, groups=groups), hb.block_size


def sparse_mla_block(kv: ModelKv, block_size: int) -> int | None:
    """DeepSeek-V3.2's block (None for other models): vLLM 0.11 platforms/cuda.py sets 64
    whatever --block-size and GPU ("Forcing kv cache block size to 64 for FlashMLASparse
    backend."), as ``costs.memory.settings.mla_block_size`` does for capacity."""
    from kvplan.costs.memory.vllm_defaults import FLASHMLA_BLOCK_SIZE
    from kvplan.specs.kv import MLASpec

    if not any(isinstance(g.spec, MLASpec) and g.spec.indexer_dim for g in kv.groups):
        return None
    if block_size != FLASHMLA_BLOCK_SIZE:
        from kvplan.notes import note

        note("%s: vLLM runs DeepSeek-V3.2's sparse MLA (FlashMLASparse) in blocks of %d "
             "tokens on every GPU (blocks of %d asked for)", kv.model, FLASHMLA_BLOCK_SIZE,
             block_size)
    return FLASHMLA_BLOCK_SIZE


def _tokens_after_each_step(prompt: int, output: int, chunk: int | None) -> list[int]:
    size = prompt if chunk is None else chunk
    prefill = [min(prompt, size * (k + 1)) for k in range(cdiv(prompt, size))]
    return prefill + [prompt + j for j in range(1, output + 1)]


def _check_lengths(prompt: int, output: int, chunk: int | None, block: int) -> None:
    if prompt < 1:
        raise InputError(f"--prompt must be at least 1 token, got {prompt}")
    if output < 1:  # vLLM 0.11 SamplingParams: "max_tokens must be at least 1"
        raise InputError(f"--output must be at least 1 token (vLLM refuses max_tokens below "
                         f"1), got {output}")
    if chunk is not None and chunk < 1:
        raise InputError(f"--chunk must be at least 1 token, got {chunk}")
    if block < 1:
        raise InputError(f"--block-size must be at least 1 token, got {block}")
    for flag, value in (("--prompt", prompt), ("--output", output)):
        if value > MAX_TOKENS:  # the flag first: the web page shows it by its field
            raise InputError(f"{flag} must be at most {MAX_TOKENS:,} tokens, got {value}")
    if prompt + output > MAX_TOKENS:
        raise InputError(f"--prompt + --output = {prompt + output:,} tokens; kvplan reads "
                         f"requests of at most {MAX_TOKENS:,} tokens")


def _check_context(total: int, limit: int | None) -> None:
    if limit is not None and total > limit:
        raise InputError(
            f"--prompt + --output = {total:,} tokens exceeds the model's context of {limit:,} "
            "tokens (max_position_embeddings); shorten the request"
        )


def _check_steps(prompt: int, output: int, chunk: int | None) -> None:
    """One ClaimStep per step (~350 B; ~2.5 KB as --json): a model whose context passes 10^6
    tokens (a custom config.json) could ask for 10^8 of them, ~35 GB."""
    steps = (1 if chunk is None else cdiv(prompt, chunk)) + output
    if steps > limits.MAX_TIMELINE_STEPS:
        chunks = "1 prefill step" if chunk is None else f"{cdiv(prompt, chunk):,} prefill chunks"
        raise InputError(
            f"the claim schedule has one step per token: {chunks} + {output:,} decode steps = "
            f"{steps:,}; kvplan lists at most {limits.MAX_TIMELINE_STEPS:,} (~350 MB); give a "
            "shorter --output or a larger --chunk (kvplan batch prices any length)")
