"""The disaggregated grid and each role's serve line, for the joint planner (``joint.py``).

    enumerate   prefill GPU x decode GPU x (layout_p, layout_d: tp_d a multiple of tp_p)
                x x x y; a layout is (tp, dp, ep): TP only for a dense model; for an MoE
                model also the DP degrees of the space within one node, EP on where
                dp > 1 unless --enable-expert-parallel says otherwise (``pool_layouts``)

Memory, price, the zero-load floors and the work bounds are ``screen.py``'s; simulation and
ranking are the joint planner's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from kvplan.analysis.plan.parallel.space import DEFAULT_DP, EP_WITH_DP, left_out
from kvplan.costs.memory.ep_layout import parallel_layout
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment, vllm_serve_argv, vllm_serve_env
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.links import LinkSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


Layout = tuple[int, int, bool]
"""(tp, dp, ep) of one pool's instances."""


def pool_layouts(model: ModelSpec, gpu: HardwareSpec, tps: Sequence[int],
                 dps: Sequence[int] = (1,), eps: Sequence[bool | None] = (EP_WITH_DP,),
                 default_dp: bool = True) -> list[Layout]:
    """One pool's (tp, dp, ep) on ``gpu``: every TP at dp 1 (EP off unless given on), and for
    an MoE model each dp > 1 of ``dps`` that vLLM can build (ep_layout.parallel_layout) and,
    for the default DP list, that fits one node. EP: the given values; the default entry
    is on at dp > 1 (wide EP, the disaggregated decode layout of vLLM and SGLang)."""
    out: list[Layout] = []
    for dp in dps if model.moe is not None else (1,):
        for tp in tps:
            if left_out(gpu, tp, 1, dp, default_dp):
                continue
            for ep in dict.fromkeys(dp > 1 if e is None else e for e in eps):
                try:
                    parallel_layout(model, tp, 1, dp, ep)
                except KvplanError:
                    continue
                out.append((tp, dp, ep))
    return out


def enumerate_disagg(model: ModelSpec, gpus: Sequence[HardwareSpec], engine: EngineConfig,
                     link: LinkSpec, *, tps: Sequence[int] = (1, 2, 4, 8),
                     max_instances: int = 4, dps: Sequence[int] = (1,),
                     eps: Sequence[bool | None] = (EP_WITH_DP,)) -> list[DisaggDeployment]:
    """Every valid xPyD fleet in the grid (invalid pairs, e.g. a node link too small, out)."""
    out = []
    counts = range(1, max_instances + 1)
    engines: dict[Layout, EngineConfig | None] = {}  # each layout's flags checked once
    lays = {g.id: pool_layouts(model, g, tps, dps, eps, default_dp=dps == DEFAULT_DP)
            for g in gpus}
    for lay in {x for v in lays.values() for x in v}:
        try:
            engines[lay] = replace(engine, tensor_parallel_size=lay[0],
                                   data_parallel_size=lay[1], enable_expert_parallel=lay[2])
        except KvplanError:
            engines[lay] = None
    for gp, gd in itertools.product(gpus, gpus):
        for lp, ld, x, y in itertools.product(lays[gp.id], lays[gd.id], counts, counts):
            e_p, e_d = engines[lp], engines[ld]
            if ld[0] % lp[0] or e_p is None or e_d is None:
                continue
            out += _fleet(model, (gp, e_p, x), (gd, e_d, y), link)
    return out


def _fleet(model: ModelSpec, pre: tuple[HardwareSpec, EngineConfig, int],
           dec: tuple[HardwareSpec, EngineConfig, int], link: LinkSpec
           ) -> list[DisaggDeployment]:
    """The fleet of the two pools, or none where DisaggDeployment refuses it."""
    try:
        pools = [Deployment(model=model, gpu=g, replicas=n, engine=e) for g, e, n in (pre, dec)]
        return [DisaggDeployment(prefill=pools[0], decode=pools[1], link=link)]
    except KvplanError:
        return []


def serve_lines(dd: DisaggDeployment, model_id: str | None = None) -> dict[str, str]:
    """The `vllm serve` line of each role (NixlConnector), a proxy note and a bench line."""
    lines = {}
    for role, d in (("prefill", dd.prefill), ("decode", dd.decode)):
        argv = [*vllm_serve_env(d), *vllm_serve_argv(d, model_id),  # env: none for TP pools
                "--kv-transfer-config", f"'{NIXL}'"]
        if role == "decode":  # simulated without prefix-cache hits on the decode side
            argv = [a if a != "--enable-prefix-caching" else "--no-enable-prefix-caching"
                    for a in argv]
        lines[role] = f"{d.replicas} x: " + " ".join(argv)
    lines["proxy"] = ("vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py "
                      "--prefiller-hosts ... --decoder-hosts ... (round robin both sides)")
    lines["bench"] = f"vllm bench serve --model {model_id or dd.prefill.model.name} " \
                     "--base-url http://PROXY:PORT"
    return lines
