"""The DP / EP what-ifs of an MoE winner (rows of the plan's lever table).

Each is one change of the winner's parallel layout, searched and verified as every lever:

* a DP winner: the same GPUs as one TP engine (``--data-parallel-size 1
  --tensor-parallel-size dp x tp``, experts TP-sharded), and the same DP layout with EP
  flipped (experts whole over dp x tp GPUs, or TP-sharded over them);
* a TP winner (tp > 1): the same GPUs as DP ranks of TP1 with EP (``--tensor-parallel-size 1
  --data-parallel-size tp --enable-expert-parallel``);
* any MoE winner: twice the DP ranks (its EP setting kept; a TP winner's with EP): a wider
  replica, fewer of them.

A variant vLLM cannot build (EP wider than the experts, a TP degree that splits the KV
heads unevenly, a replica wider than a node) is a note saying why, as for the other levers.

Dual batch overlap (``dbo_variant``): a DP winner of an MoE model is also tried with
``--enable-dbo`` and the DeepEP exchange vLLM's DBO needs (vLLM docs/design/dbo.md: DP > 1,
EP, ``VLLM_ALL2ALL_BACKEND`` deepep_low_latency for a workload that is mostly decode,
deepep_high_throughput for one that is mostly prefill): the high-throughput kernels when the
winner's binding term is a TTFT, else the low-latency ones (also where kvplan does not know
the GPU's SM count, which the high-throughput pricing needs). The row changes the exchange
and the overlap together, since vLLM runs DBO only over DeepEP. A DP winner without EP gets
the row as a note with vLLM's refusal (the EP-flip row is the layout it needs); a TP winner
(dp 1) gets none. DBO is a lever row only, not a dimension of the search space: every DP +
EP layout would need a DBO twin and a backend choice, doubling the lockstep simulations
(the planner's slowest) of every MoE plan and adding keys to every candidate record.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.costs.step.parallel.ep_comm import DEEPEP
from kvplan.costs.step.parallel.overlap import GPU_SMS
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.kv import check_tensor_parallel

DBO_DECODE_BACKEND = "deepep_low_latency"
DBO_PREFILL_BACKEND = "deepep_high_throughput"


def parallel_variants(d: Deployment) -> list[tuple[str, Deployment]]:
    """The winner's layout changed one way at a time (module docstring); none for dense."""
    if d.model.moe is None:
        return []
    e = d.engine
    tp, dp = e.tensor_parallel_size, e.data_parallel_size
    out: list[tuple[str, Deployment]] = []
    if dp > 1:
        if _tp_ok(d, tp * dp):
            out.append((f"--data-parallel-size 1 --tensor-parallel-size {tp * dp}",
                        _layout(d, tp=tp * dp, dp=1, ep=False)))
        ep = e.enable_expert_parallel
        out.append(("without --enable-expert-parallel" if ep else "--enable-expert-parallel",
                    _layout(d, tp=tp, dp=dp, ep=not ep)))
    elif tp > 1:
        out.append((f"--tensor-parallel-size 1 --data-parallel-size {tp} "
                    "--enable-expert-parallel", _layout(d, tp=1, dp=tp, ep=True)))
    ep2 = e.enable_expert_parallel or dp == 1  # a TP winner doubles into the DP + EP pool
    out.append((f"--data-parallel-size {2 * dp}" + (" --enable-expert-parallel" if ep2 else ""),
                _layout(d, tp=tp, dp=2 * dp, ep=ep2)))
    return out


def _tp_ok(d: Deployment, tp: int) -> bool:
    try:
        check_tensor_parallel(d.model, tp)
    except KvplanError:
        return False
    return True


def _layout(d: Deployment, *, tp: int, dp: int, ep: bool) -> Deployment:
    engine = replace(d.engine, tensor_parallel_size=tp, data_parallel_size=dp,
                     enable_expert_parallel=ep)
    return Deployment(model=d.model, gpu=d.gpu, engine=engine, router=d.router)


def dbo_variant(d: Deployment, binding_key: str | None) -> list[tuple[str, Deployment]]:
    """The winner with ``--enable-dbo`` over a DeepEP exchange (module docstring): one
    variant for an MoE DP winner (built, or refused by vLLM's rules, later), else none."""
    e = d.engine
    if d.model.moe is None or e.data_parallel_size < 2 or e.enable_dbo:
        return []
    backend = e.all2all_backend if e.all2all_backend in DEEPEP else dbo_backend(
        d, binding_key)
    label = "--enable-dbo" + ("" if backend == e.all2all_backend
                              else f" with VLLM_ALL2ALL_BACKEND={backend}")
    engine = replace(e, enable_dbo=True, all2all_backend=backend)
    return [(label, Deployment(model=d.model, gpu=d.gpu, engine=engine, router=d.router))]


def dbo_backend(d: Deployment, binding_key: str | None) -> str:
    """vLLM's advice for DBO's exchange: the normal (high-throughput) DeepEP kernels where
    prefill binds (a TTFT term) and the GPU's SM count is known, else the low-latency ones."""
    if binding_key is not None and "ttft" in binding_key and d.gpu.id in GPU_SMS:
        return DBO_PREFILL_BACKEND
    return DBO_DECODE_BACKEND
