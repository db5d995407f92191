"""A step's Gated DeltaNet layers priced from the measured GDN kernels (``kernels.gdn``), in
the linear terms the simulator's aggregate step carries::

    prefill, per layer   t = per_token * T            (T tokens of the step)
    decode,  per layer   t = per_step + per_request * R   (R requests)

``per_token``: the measured prefill of one chunk of the step's token budget cut into prompts
of ``PREFILL_PROMPT`` tokens; ``per_step`` and ``per_request``: the least-squares line
(relative error, each at least 0) through the measured decode at 1..1,024 requests.

The tables measure Qwen3.5's layers, whose config keeps the recurrent state in fp32
(``mamba_ssm_dtype``) and the conv state in bf16: ``measured_state_bytes``. The decode
slope streams that state (H100, 8 key / 16 value heads, 1,024 requests: 1.07 MB read and
written per request and layer in 745 us, 2.9 TB/s), so the step scales it by the
deployment's own state bytes over those (``coefficients.measured_coefficients``).

The chunked kernel's time is bound by the longest sequence as well as by the step's tokens
(H100, Qwen3-Next at TP2, 8,192 tokens: 186 us per layer as 64 prompts of 128, 469 us as one
prompt of 8,192; 159 us as 32 prompts of 256, the rate above): its scan runs along each
sequence, so one long prompt cannot spread over the GPU. ``gdn_sequence_s`` gives the
measured time of one sequence of L tokens; the step prices its GDN prefill as
``max(per_token * T, sequence(L))``, L its longest prompt chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.tables import capped_at
from kvplan.costs.step.ops import GdnOp
from kvplan.costs.step.records import at_most

PREFILL_PROMPT = 256
"""Tokens per prompt the prefill rate is read at (vLLM's ShareGPT first turns: ~220)."""
CONV_KERNEL_MEASURED = 4
"""The tables' d_conv (every measured case)."""
_DECODE_B = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, slots=True, kw_only=True)
class GdnRates:
    """Seconds of a stage's GDN layers, summed over them."""

    per_token_s: float
    per_request_s: float
    """At the measured state (``measured_state_bytes``)."""
    per_step_s: float
    measured_state_bytes: int
    """State bytes per request of these layers as measured: bf16 conv, fp32 recurrent."""

    def state_ratio(self, state_bytes: int) -> float:
        """A deployment's state bytes per request over the measured ones: the factor on
        ``per_request_s`` (the decode slope streams the state)."""
        return state_bytes / self.measured_state_bytes


@lru_cache(maxsize=64)
def gdn_rates(gpu: str, op: GdnOp, chunk: int) -> GdnRates | None:
    """``op``'s layers on ``gpu`` for steps of up to ``chunk`` tokens; None where the GPU has
    no measured GDN table at these per-GPU heads (the step keeps its roofline)."""
    from kvplan.costs.kernels.gdn import gdn_decode, gdn_prefill

    shape = {"key_heads": op.key_heads, "value_heads": op.value_heads,
             "key_dim": op.key_dim, "value_dim": op.value_dim}
    length = min(PREFILL_PROMPT, max(chunk, 1))
    seqs = max(1, chunk // length)
    pre = gdn_prefill(gpu, seqs, length, **shape)
    dec = gdn_decode(gpu, np.array(_DECODE_B, dtype=np.int64), **shape)
    if pre is None or dec is None:
        return None
    per_token = float(pre.seconds) / (seqs * length)
    floor, slope = _decode_line(dec.seconds)
    n = op.count
    conv = CONV_KERNEL_MEASURED - 1
    conv_el = conv * (2 * op.key_heads * op.key_dim + op.value_heads * op.value_dim)
    ssm_el = op.value_heads * op.key_dim * op.value_dim
    rates = GdnRates(per_token_s=n * per_token, per_request_s=n * slope, per_step_s=n * floor,
                     measured_state_bytes=n * (2 * conv_el + 4 * ssm_el))
    ref = capped_at(gpu)  # the same die (H200: H100): never slower than its rates
    return rates if ref is None else at_most(rates, gdn_rates(ref, op, chunk))


def _decode_line(t: np.ndarray) -> tuple[float, float]:
    """(floor, per request) of t = floor + slope * B through the measured decode times."""
    b = np.array(_DECODE_B, dtype=np.float64)
    rows = np.stack([1.0 / t, b / t], axis=1)
    coef = np.linalg.lstsq(rows, np.ones(len(b)), rcond=None)[0]
    return max(0.0, float(coef[0])), max(0.0, float(coef[1]))


@lru_cache(maxsize=64)
def gdn_sequence_s(gpu: str, op: GdnOp, max_tokens: int) -> npt.NDArray[np.float64]:
    """[L], L = 0..max_tokens: ``op``'s layers (summed) prefilling one sequence of L tokens,
    read off the measured ``gdn_ctx`` table at batch 1 (0 below 2 tokens, where no request
    takes the chunked path). Read-only: shared by every model priced on it."""
    from kvplan.costs.kernels.gdn import gdn_prefill

    out = np.zeros(max_tokens + 1, dtype=np.float64)
    if max_tokens >= 2:
        lengths = np.arange(2, max_tokens + 1, dtype=np.int64)
        pre = gdn_prefill(gpu, np.ones(len(lengths), dtype=np.int64), lengths,
                          key_heads=op.key_heads, value_heads=op.value_heads,
                          key_dim=op.key_dim, value_dim=op.value_dim)
        if pre is not None:
            out[2:] = op.count * np.asarray(pre.seconds, dtype=np.float64)
        if (ref := capped_at(gpu)) is not None:  # the same die: never slower than its table
            out = np.minimum(out, gdn_sequence_s(ref, op, max_tokens))
    out.setflags(write=False)
    return out
