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
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.kv import check_tensor_parallel


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
