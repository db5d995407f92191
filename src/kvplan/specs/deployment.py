"""Deployment: one point of the search space — model, GPU, engine flags, replicas, router."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.api_check import check_fields, named_fields
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

ROUTERS = ("round-robin", "least-outstanding", "prefix-affinity")
"""How a fleet's router assigns arrivals to replicas (see docs/planner.md, Fleet)."""


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class Deployment:
    """N identical vLLM replicas of one engine configuration behind one router.

    Capacity, latency, simulate and plan all take this value; the engine flags are resolved
    once (``EngineConfig``) and nothing below re-reads command-line text.
    """

    model: ModelSpec
    gpu: HardwareSpec
    engine: EngineConfig
    replicas: int = 1
    router: str = "round-robin"

    def __post_init__(self) -> None:
        check_fields(self)  # a name for the model, a float for replicas: ArgumentTypeError
        if self.replicas < 1:
            raise InputError(f"--replicas must be a positive whole number, got {self.replicas}")
        if self.router not in ROUTERS:
            raise InputError(f"--router {self.router!r}: choose one of {', '.join(ROUTERS)}")

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica (one ``vllm serve``): tp x pp x dp."""
        return self.engine.world_size_across_dp

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus_per_replica

    def with_replicas(self, replicas: int) -> Deployment:
        """The same configuration with another replica count."""
        return Deployment(model=self.model, gpu=self.gpu, engine=self.engine,
                          replicas=replicas, router=self.router)


def vllm_serve_env(d: Deployment) -> list[str]:
    """The environment the ``vllm serve`` line runs under for what kvplan priced: the MoE
    token exchange of a DP group as ``VLLM_ALL2ALL_BACKEND=...`` (written also when it is
    vLLM's default), none for a dense model or one engine (no exchange).

    An environment variable, not a flag: vLLM 0.11 (the bundled option table) reads only
    ``VLLM_ALL2ALL_BACKEND``; newer vLLM adds ``--all2all-backend`` and still reads the
    variable. kvplan's ``deepep`` (its earlier name for the low-latency pricing) is written
    as vLLM's ``deepep_low_latency``. Marlin MXFP4 experts: ``VLLM_MXFP4_USE_MARLIN=1``.
    """
    e = d.engine
    marlin = (["VLLM_MXFP4_USE_MARLIN=1"] if e.mxfp4_moe_backend == "marlin"
              and d.model.moe is not None and d.model.quantization == "mxfp4" else [])
    if d.model.moe is None or e.data_parallel_size < 2:
        return marlin
    backend = "deepep_low_latency" if e.all2all_backend == "deepep" else e.all2all_backend
    return [f"VLLM_ALL2ALL_BACKEND={backend}", *marlin]


def vllm_serve_argv(d: Deployment, model_id: str | None = None,
                    block_size: int | None = None) -> list[str]:
    """The ``vllm serve`` command line holding every engine knob that was simulated.

    Every flag is written explicitly (also vLLM's defaults), so the line reads back to the
    same EngineConfig through ``kvplan capacity -- vllm serve ...``. ``model_id`` is the id
    the user gave (an Instruct variant, not the base config it was sized from); ``block_size``
    the block vLLM will use (an MLA backend may force one), else the configured one.
    """
    e = d.engine
    argv = ["vllm", "serve", model_id or d.model.name,
            "--tensor-parallel-size", str(e.tensor_parallel_size),
            "--pipeline-parallel-size", str(e.pipeline_parallel_size),
            "--gpu-memory-utilization", str(e.gpu_memory_utilization),
            "--block-size", str(block_size or e.block_size), "--kv-cache-dtype", e.kv_cache_dtype,
            "--dtype", e.dtype]
    for flag, value in (("--quantization", e.quantization), ("--max-model-len", e.max_model_len),
                        ("--max-num-seqs", e.max_num_seqs),
                        ("--max-num-batched-tokens", e.max_num_batched_tokens)):
        if value is not None:
            argv += [flag, str(value)]
    if e.data_parallel_size > 1:
        argv += ["--data-parallel-size", str(e.data_parallel_size)]
    if e.enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    if e.enable_dbo:
        argv += ["--enable-dbo", "--dbo-decode-token-threshold",
                 str(e.dbo_decode_token_threshold), "--dbo-prefill-token-threshold",
                 str(e.dbo_prefill_token_threshold)]
    if e.async_scheduling:
        argv.append("--async-scheduling")
    argv.append("--enable-prefix-caching" if e.enable_prefix_caching
                else "--no-enable-prefix-caching")
    argv.append("--enable-chunked-prefill" if e.enable_chunked_prefill
                else "--no-enable-chunked-prefill")
    return argv
