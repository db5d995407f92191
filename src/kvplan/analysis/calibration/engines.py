"""The scheduler another engine's measured run is replayed with (calibration only).

vLLM's rules are kvplan's (``kvplan.sim.scheduler``). SGLang's scheduler differs where it
matters for a burst of requests: it runs a prefill-only batch whenever it can schedule prompt
work and decodes only when it cannot (``Scheduler.get_next_batch_to_run``; mixed chunks are off
by default), so a 1,000-prompt burst prefills every prompt before most requests decode (high
TPOT, low TTFT), where vLLM mixes the two in every step. Its defaults (SGLang 0.5,
``server_args.py``, ``_handle_gpu_memory_settings``): ``chunked_prefill_size`` 8,192 tokens on
GPUs under 160 GiB (A100, H100, H200), 16,384 above (B200, MI300X); ``max_running_requests``
from the KV pool, at least 2,048 requests (``max_num_reqs``), so the pool binds first.
Not modelled: SGLang admits a prompt only if the pool keeps room for the running requests'
future tokens (``new_token_ratio`` x their remaining outputs); kvplan admits on the blocks the
prompt needs now, as vLLM does, and takes the pool size from vLLM's arithmetic.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.sim.scheduler import Limits
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.serving import EngineConfig

SGLANG_RUNNING_MIN = 2048
"""SGLang's smallest default ``max_num_reqs`` (its request pool), the running-request cap."""


def sglang_chunk_tokens(gpu: HardwareSpec) -> int:
    """SGLang's default ``chunked_prefill_size`` for a GPU of this memory (see module doc)."""
    return 16384 if gpu.memory_bytes >= 160 * 1024**3 else 8192


def engine_limits(engine_key: str, limits: Limits, gpu: HardwareSpec,
                  engine: EngineConfig) -> Limits:
    """``limits`` (vLLM's) as ``engine_key``'s scheduler runs them; a run's own settings
    (``engine``: ``--chunked-prefill-size`` as max_num_batched_tokens,
    ``--max-running-requests`` as max_num_seqs) win over SGLang's defaults."""
    if engine_key != "sglang":
        return limits
    chunk = engine.max_num_batched_tokens or sglang_chunk_tokens(gpu)
    seqs = engine.max_num_seqs or max(limits.max_num_seqs, SGLANG_RUNNING_MIN)
    return replace(limits, prefill_first=True, max_num_batched_tokens=chunk, max_num_seqs=seqs,
                   long_prefill_token_threshold=0)
