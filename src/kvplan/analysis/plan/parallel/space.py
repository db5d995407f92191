"""The DP / EP levers of the planner's space (vLLM --data-parallel-size, --enable-expert-parallel).

An MoE model's replica may be one ``vllm serve`` of dp engines of tp x pp GPUs, its experts
spread whole over ep = dp x tp GPUs (EP) or TP-sharded over them (docs/parallelism.md). The
default space holds, for an MoE model, DP degrees 1, 2, 4, 8, each dp > 1 with EP and
without, and only the combinations that fit in one node (dp x tp x pp <= the GPU's node
GPUs): TP 1, 2, 4, 8 give 7 + 5 + 3 + 1 = 16 layouts per GPU and chunk instead of 4. Both EP
settings are searched because neither wins everywhere: the EP step pays the expert
imbalance, the sharded one does not (DeepSeek-V3 on H200 in docs/planner.md). A dense
model's space holds DP 1 only: vLLM runs a dense model's DP ranks as independent engines,
which are the planner's replicas already.

Rules a given list must respect (else one ``error:`` line, exit 2, before any search):
DP on a dense model is refused (use --replicas), --enable-expert-parallel on a dense model is
refused (no expert reads it), and every DP degree must give a layout vLLM can build with at
least one TP degree of the space (EP no wider than the experts; without EP each expert's
intermediate size divisible by tp x dp). Layouts that fail for one TP degree only, or that
span more than one node of a GPU whose inter-node link kvplan does not know, are recorded
as stage ``invalid`` with vLLM's reason, as an unsupported TP degree is.
"""

from __future__ import annotations

from kvplan.costs.memory.ep_layout import DEFAULT_NODE_GPUS, parallel_layout
from kvplan.errors import InputError, KvplanError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec

DEFAULT_DP = (1, 2, 4, 8)
"""--data-parallel-size searched by default for an MoE model (within one node)."""
EP_WITH_DP: bool | None = None
"""The default --enable-expert-parallel entry: both on and off when dp > 1, off at dp 1."""


def default_dp_sizes(model: ModelSpec) -> tuple[int, ...]:
    """DP degrees the default space holds: 1, 2, 4, 8 for an MoE model, 1 for a dense one."""
    return DEFAULT_DP if model.moe is not None else (1,)


def ep_values(eps: tuple[bool | None, ...], dp: int) -> tuple[bool, ...]:
    """The --enable-expert-parallel values searched at ``dp`` ranks: a given on / off as
    given; the default entry (None) both, EP first, when dp > 1 (the experts spread whole
    over dp x tp GPUs, or TP-sharded over them), and off at dp 1 (the TP-only space)."""
    out: list[bool] = []
    for ep in eps:
        for v in ((True, False) if dp > 1 else (False,)) if ep is None else (ep,):
            if v not in out:
                out.append(v)
    return tuple(out)


def left_out(gpu: HardwareSpec, tp: int, pp: int, dp: int, default_dp: bool) -> bool:
    """A default-space DP layout wider than one node is not enumerated (bounded grid)."""
    return default_dp and dp > 1 and dp * tp * pp > (gpu.node_gpus or DEFAULT_NODE_GPUS)


def check_parallel_lists(model: ModelSpec, tps: tuple[int, ...], dps: tuple[int, ...],
                         eps: tuple[bool | None, ...]) -> None:
    """Refuse, in one line, DP / EP values no candidate of the space could be built with."""
    for dp in dps:
        if dp < 1:
            raise InputError(f"--data-parallel-size must be a positive whole number, got {dp}")
    if model.moe is None:
        if any(dp > 1 for dp in dps):
            raise InputError(
                f"{model.name} is dense: vLLM runs its DP ranks as independent engines, "
                "which are replicas; drop --data-parallel-size (the planner sizes "
                "--replicas itself)")
        if any(ep for ep in eps):
            raise InputError(f"{model.name} has no experts; drop --enable-expert-parallel")
        return
    for dp in dps:
        _check_dp(model, tps, dp, eps)


def _check_dp(model: ModelSpec, tps: tuple[int, ...], dp: int,
              eps: tuple[bool | None, ...]) -> None:
    """At least one (tp, ep) of the space gives a layout vLLM builds with ``dp`` ranks."""
    first = ""
    for tp in tps:
        for ep in ep_values(eps, dp):
            try:
                parallel_layout(model, tp, 1, dp, ep)
                return
            except KvplanError as exc:
                first = first or str(exc)
    raise InputError(f"--data-parallel-size {dp}: {first}")
