"""CUDA-graph padding: vLLM runs a step of T <= max captured tokens as the smallest captured
graph of at least T tokens, so its GEMMs, MoE and all-reduces compute the padded count.

vLLM 0.11.0 (``VllmConfig._set_cudagraph_sizes``): the captured sizes are 1, 2, 4, then
multiples of 8 up to ``min(2 x max_num_seqs, 512)``; a longer step runs unpadded (piecewise
graphs are not used past the largest size)::

    T = 3 -> 4,  T = 9 -> 16,  T = 250 -> 256,  T = 257 -> 264,  T = 512 -> 512,  T = 513 -> 513

gpt-oss is the exception (``GptOssForCausalLMConfig``, applied before the sizes are set): its
list is 1, 2, 4, multiples of 8 below 256, then multiples of 16 up to 992, whatever
max_num_seqs (T = 257 -> 272, 513 -> 528, 992 -> 992, 993 -> 993).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

MAX_CAPTURE_TOKENS = 512
"""vLLM's cap on the largest captured size (``max_cudagraph_capture_size`` default)."""
GPT_OSS_MAX_CAPTURE_TOKENS = vd.GPT_OSS_MAX_CAPTURE
"""gpt-oss's largest captured size (vLLM 0.11 ``GptOssForCausalLMConfig``)."""


def max_capture_tokens(engine: EngineConfig, model: ModelSpec | None = None) -> int:
    """The largest captured size: min(2 x max_num_seqs, 512) (both vLLM defaults, 256 and
    1024 sequences, give 512); 992 for gpt-oss (``model``)."""
    if model is not None and model.model_type == "gpt_oss":
        return GPT_OSS_MAX_CAPTURE_TOKENS
    seqs = engine.max_num_seqs
    return MAX_CAPTURE_TOKENS if seqs is None else min(2 * seqs, MAX_CAPTURE_TOKENS)


def capture_sizes(max_tokens: int) -> tuple[int, ...]:
    """vLLM's captured sizes up to ``max_tokens``: steps of 8, or - past 512, which only
    gpt-oss captures - steps of 16 from 256 (gpt-oss's list)."""
    if max_tokens > MAX_CAPTURE_TOKENS:
        sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_tokens + 1, 16)]
    else:
        sizes = [1, 2, 4, *range(8, max_tokens + 1, 8)]
    return tuple(s for s in sizes if s <= max_tokens)


def padded_tokens(tokens: npt.NDArray[np.int64], max_tokens: int) -> npt.NDArray[np.int64]:
    """Each step's token count as the graph it replays computes it (unpadded past the cap)."""
    sizes = np.asarray(capture_sizes(max_tokens), dtype=np.int64)
    if not len(sizes):
        return tokens
    at = np.searchsorted(sizes, tokens, side="left")
    inside = (tokens <= sizes[-1]) & (tokens > 0)
    return np.where(inside, sizes[np.minimum(at, len(sizes) - 1)], tokens)
