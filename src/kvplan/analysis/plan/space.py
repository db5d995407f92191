"""The search space of a plan: lists of vLLM flag values, enumerated into Deployments."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.analysis.plan.parallel.space import EP_WITH_DP, ep_values, left_out
from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.settings import mla_block_size, prefix_caching_runs
from kvplan.costs.memory.weight_formats import resolve_format
from kvplan.errors import InputError, KvplanError
from kvplan.limits import MAX_PLAN_CONFIGS
from kvplan.specs.deployment import ROUTERS, Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import check_tensor_parallel
from kvplan.specs.kv_precision import resolve_precision
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_CHUNKS: tuple[int | None, ...] = (512, 2048, None)
"""--max-num-batched-tokens searched by default: small chunks to vLLM's default (None; 8192
on >= 70 GiB GPUs but A100, else 2048, where 2048 is then a duplicate). The chunk decides how
a long prompt's prefill shares steps with running decodes: the TTFT / TPOT trade."""


_LISTS = ("gpus", "tensor_parallel_sizes", "pipeline_parallel_sizes", "kv_cache_dtypes",
          "quantizations", "max_num_seqs", "max_num_batched_tokens", "block_sizes",
          "prefix_caching", "data_parallel_sizes", "expert_parallel")
"""The space's flag lists: each must be non-empty; the space is their product (less the
default DP layouts wider than a node: parallel/space.py)."""


_FLAGS = dict(zip(_LISTS, ("--gpu", "-tp", "-pp", "--kv-cache-dtype", "-q", "--max-num-seqs",
                           "--max-num-batched-tokens", "--block-size",
                           "--enable-prefix-caching", "-dp", "--enable-expert-parallel"),
                  strict=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Every list is one vLLM flag's values; None entries mean vLLM's default for that GPU."""

    gpus: tuple[HardwareSpec, ...]
    tensor_parallel_sizes: tuple[int, ...]
    pipeline_parallel_sizes: tuple[int, ...] = (1,)
    kv_cache_dtypes: tuple[str, ...] = ("auto",)
    quantizations: tuple[str | None, ...] = (None,)
    max_num_seqs: tuple[int | None, ...] = (None,)
    max_num_batched_tokens: tuple[int | None, ...] = (None,)
    block_sizes: tuple[int, ...] = (16,)
    prefix_caching: tuple[bool, ...] = (True,)
    data_parallel_sizes: tuple[int, ...] = (1,)
    expert_parallel: tuple[bool | None, ...] = (EP_WITH_DP,)
    """--enable-expert-parallel entries; None: both with DP, off at dp 1 (parallel/space.py)."""
    default_dp: bool = False
    """The DP list is the default one: layouts wider than one node are left out."""
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 0
    async_scheduling: bool = False
    """vLLM --async-scheduling, the same on every candidate (not a searched list)."""

    def __post_init__(self) -> None:
        for name in _LISTS:
            if not getattr(self, name):
                raise InputError(f"the {name.replace('_', '-')} list is empty; give at "
                                 "least one value")
        if self.size > MAX_PLAN_CONFIGS:
            lists = ", ".join(f"{_FLAGS[name]} {len(getattr(self, name))}" for name in _LISTS
                              if len(getattr(self, name)) > 1)
            raise InputError(f"the search space has {self.size:,} configurations ({lists} "
                             f"values); kvplan plan searches at most {MAX_PLAN_CONFIGS:,} "
                             "(each takes ~5 ms to screen): shorten the longest lists")

    @property
    def size(self) -> int:
        """The lists' product. ``enumerate_space`` differs from it under the DP rules: the
        default ``expert_parallel`` entry counts once here but gives EP on and off at
        dp > 1, and default DP layouts wider than a node are left out."""
        return math.prod(len(getattr(self, name)) for name in _LISTS)


ENGINE_LISTS = ("tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs",
                "max_num_batched_tokens", "block_size")
"""EngineConfig fields whose values a plan takes as lists (check_flag_values)."""


def check_flag_values(lists: dict[str, Sequence[object]], kv_cache_dtypes: Sequence[str],
                      quantizations: Sequence[str | None], router: str,
                      **engine: object) -> None:
    """One error line for a value vLLM refuses whatever the model and GPU (a degree or limit
    out of range, a block size it lacks, an unknown KV dtype, weight format or router;
    ``engine``: single EngineConfig values), before any candidate is built. A TP degree
    the model's heads refuse stays a candidate of stage ``invalid``."""
    for field, values in lists.items():
        for value in values:
            if value is not None:
                EngineConfig(**{field: value})  # type: ignore[arg-type]
    EngineConfig(**engine)  # type: ignore[arg-type]
    for kv in kv_cache_dtypes:  # fp8_ds_mla: checked per model (DeepSeek-V3.2 only)
        resolve_precision(kv, "bfloat16", sparse_mla=kv.strip().lower() == "fp8_ds_mla")
        EngineConfig(kv_cache_dtype=kv)  # vLLM's own refusals (float32)
    for quant in quantizations:
        resolve_format(quant, None, None)
    if router not in ROUTERS:
        raise InputError(f"--router {router!r}: choose one of {', '.join(ROUTERS)}")


def valid_tp_degrees(model: ModelSpec, up_to: int = 8) -> tuple[int, ...]:
    """The TP degrees (powers of two up to ``up_to``) vLLM accepts for ``model``."""
    out = []
    for tp in DEFAULT_TP:
        if tp > up_to:
            break
        try:
            check_tensor_parallel(model, tp)
        except KvplanError:
            continue
        out.append(tp)
    return tuple(out)


def enumerate_space(model: ModelSpec, space: SearchSpace, router: str
                    ) -> list[tuple[Deployment | None, str, dict[str, object]]]:
    """Every combination as (Deployment or None if vLLM refuses it, why, its flag values).

    Unset scheduler limits are written as the GPU's vLLM defaults, and the block size as the
    one vLLM will use (an MLA backend forces 64 or 128: costs/settings.mla_block_size), prefix
    caching as vLLM runs it (off for a model with state layers: prefix_caching_runs), so each
    deployment's ``vllm serve`` line states every simulated knob and configurations vLLM runs
    alike are one (the later ones ``duplicate``).
    """
    out: list[tuple[Deployment | None, str, dict[str, object]]] = []
    for combo in itertools.product(space.gpus, space.tensor_parallel_sizes,
                                   space.pipeline_parallel_sizes, space.kv_cache_dtypes,
                                   space.quantizations, space.max_num_seqs,
                                   space.max_num_batched_tokens, space.block_sizes,
                                   space.prefix_caching, space.data_parallel_sizes):
        gpu, tp, pp, dp = combo[0], int(str(combo[1])), int(str(combo[2])), int(str(combo[9]))
        assert isinstance(gpu, HardwareSpec)
        if left_out(gpu, tp, pp, dp, space.default_dp):
            continue
        for ep in ep_values(space.expert_parallel, dp):
            flags = _flags((*combo, ep))
            try:
                out.append((_deployment(model, (*combo, ep), space, router), "", flags))
            except KvplanError as exc:
                out.append((None, str(exc), flags))
    return out


def _flags(combo: Sequence[object]) -> dict[str, object]:
    gpu = combo[0]
    assert isinstance(gpu, HardwareSpec)
    keys = ("tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype", "quantization",
            "max_num_seqs", "max_num_batched_tokens", "block_size", "enable_prefix_caching",
            "data_parallel_size", "enable_expert_parallel")
    return {"gpu": gpu.id, **dict(zip(keys, combo[1:], strict=True))}


def _deployment(model: ModelSpec, combo: Sequence[object], space: SearchSpace,
                router: str) -> Deployment:
    gpu, tp, pp, kv, quant, seqs, tokens, block, prefix, dp, ep = combo
    assert isinstance(gpu, HardwareSpec) and isinstance(tp, int)
    check_tensor_parallel(model, tp)
    budget = int(str(tokens)) if tokens is not None else vd.default_batch_limits(gpu)[0]
    engine = EngineConfig(
        tensor_parallel_size=tp, pipeline_parallel_size=int(str(pp)), kv_cache_dtype=str(kv),
        quantization=None if quant is None else str(quant),
        max_num_seqs=int(str(seqs)) if seqs is not None else vd.default_max_num_seqs(gpu, budget),
        max_num_batched_tokens=budget,
        block_size=mla_block_size(model, gpu, int(str(block))),
        enable_prefix_caching=prefix_caching_runs(model, bool(prefix)),
        data_parallel_size=int(str(dp)),
        # vLLM's FusedMoEParallelConfig: use_ep = dp_size * tp_size > 1 and the flag, so on
        # one GPU the flag does nothing and is the same engine as without it (a duplicate)
        enable_expert_parallel=bool(ep) and tp * int(str(dp)) > 1,
        gpu_memory_utilization=space.gpu_memory_utilization,
        max_model_len=space.max_model_len or None, async_scheduling=space.async_scheduling)
    return Deployment(model=model, gpu=gpu, engine=engine, router=router)
