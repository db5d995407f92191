"""Efficiency profile: the factors that turn datasheet peaks into achievable rates, and the
fixed costs (seconds) an engine step pays outside its kernels' rooflines."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.api_check import named_fields
from kvplan.errors import InputError

RATE_FACTORS = ("compute_eff", "bandwidth_eff", "comm_eff")
SECOND_FACTORS = ("step_overhead_s", "prefill_overhead_s", "allreduce_latency_s",
                  "layer_overhead_s", "moe_layer_overhead_s", "request_overhead_s",
                  "api_request_s", "api_prompt_token_s", "api_admission_s")
API_FACTORS = ("api_request_s", "api_prompt_token_s", "api_admission_s")
"""Client-side path of a served request (not engine steps): see ``Profile.api_delay_s``."""


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """Efficiency factors and fixed costs for one GPU + compute precision.

    Rates (fractions of the datasheet): dense GEMMs reach ~60% of the tensor peak in serving
    (``compute_eff``), HBM streaming ~80% (``bandwidth_eff``), NCCL / custom all-reduce ~70% of
    one link direction (``comm_eff``).

    Fixed costs (seconds), each a physical mechanism:

    * ``step_overhead_s`` - once per step: scheduler pass, input preparation, one CUDA-graph
      replay, the host sync;
    * ``prefill_overhead_s`` - once more for a step holding prefill work (piecewise/eager
      launches of variable-length kernels, attention metadata for ragged prompts);
    * ``layer_overhead_s`` - per transformer layer on the fullest pipeline stage: the gaps
      between its ~10 kernels (norms, QKV, rotary, attention, output, MLP) that a roofline
      does not see, even inside a CUDA graph;
    * ``moe_layer_overhead_s`` - extra per MoE layer: router GEMM, top-k, token permutation /
      alignment, two grouped GEMM launches over many small expert tiles, un-permute + reduce;
    * ``allreduce_latency_s`` - the small-message latency of one tensor-parallel all-reduce
      (2 per layer, 1 per Nemotron-H layer), on top of its bytes / bandwidth;
    * ``request_overhead_s`` - CPU work per scheduled request per step (scheduling bookkeeping,
      input/metadata preparation, sampling and detokenisation), so it grows with the batch.

    Outside the engine's steps, per served request (``vllm bench serve`` through the OpenAI
    API server; a static batch - ``vllm bench latency``, ``kvplan latency`` - has none):

    * ``api_request_s`` - fixed seconds between the client sending a request and the engine
      scheduling it, plus the first token's way back: HTTP, request parsing and validation,
      chat template, the hand-off to the engine core process, and the streamed token's
      detokenisation and response chunk;
    * ``api_prompt_token_s`` - seconds per prompt token on that path (tokenisation);
    * ``api_admission_s`` - seconds of the API server's one process per request, *serially*:
      vLLM's OpenAI server is a single asyncio process, so requests are admitted one after
      another (FIFO in send order). A request sent at t waits for the server, holds it
      ``api_admission_s``, then takes the parallel path above.

    The simulator delivers a request to the engine at ``S + api_delay_s(prompt)``, where
    ``S = max(sent, S of the request sent before it) + api_admission_s`` (one FIFO server),
    so the path adds to client-visible TTFT and E2E (never to ITL); 1,000 requests sent at
    once reach the engine spread over 1,000 x ``api_admission_s``; in a closed loop the next
    request follows a freed slot by the same path.
    """

    gpu: str = "*"
    precision: str = "*"
    compute_eff: float = 0.6
    bandwidth_eff: float = 0.8
    comm_eff: float = 0.7
    step_overhead_s: float = 0.7e-3
    prefill_overhead_s: float = 4e-3
    allreduce_latency_s: float = 10e-6
    layer_overhead_s: float = 0.0
    moe_layer_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    api_request_s: float = 0.0
    api_prompt_token_s: float = 0.0
    api_admission_s: float = 0.0

    def __post_init__(self) -> None:
        for name in RATE_FACTORS:
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InputError(f"profile {name} must be in (0, 1], got {value}")
        for name in SECOND_FACTORS:
            if not getattr(self, name) >= 0:  # NaN fails too
                raise InputError(f"profile {name} must be >= 0, got {getattr(self, name)}")

    def api_delay_s(self, prompt_tokens: float) -> float:
        """Seconds a served request spends outside the engine: fixed + per prompt token."""
        return self.api_request_s + self.api_prompt_token_s * prompt_tokens
