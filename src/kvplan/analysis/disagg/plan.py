"""The disaggregated grid and each role's serve line, for the joint planner (``joint.py``).

    enumerate   prefill GPU x decode GPU x (tp_p, tp_d: tp_d a multiple of tp_p) x x x y

Memory, price, the zero-load floors and the work bounds are ``screen.py``'s; simulation and
ranking are the joint planner's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment, vllm_serve_argv, vllm_serve_env
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.links import LinkSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

NIXL = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def enumerate_disagg(model: ModelSpec, gpus: Sequence[HardwareSpec], engine: EngineConfig,
                     link: LinkSpec, *, tps: Sequence[int] = (1, 2, 4, 8),
                     max_instances: int = 4) -> list[DisaggDeployment]:
    """Every valid xPyD fleet in the grid (invalid pairs, e.g. a node link too small, out)."""
    out = []
    counts = range(1, max_instances + 1)
    engines: dict[int, EngineConfig | None] = {}  # each TP's flags checked once, not per fleet
    for tp in tps:
        try:
            engines[tp] = replace(engine, tensor_parallel_size=tp)
        except KvplanError:
            engines[tp] = None
    for gp, gd, tp_p, tp_d, x, y in itertools.product(gpus, gpus, tps, tps, counts, counts):
        e_p, e_d = engines[tp_p], engines[tp_d]
        if tp_d % tp_p or e_p is None or e_d is None:
            continue
        try:
            pools = [Deployment(model=model, gpu=g, replicas=n, engine=e)
                     for g, e, n in ((gp, e_p, x), (gd, e_d, y))]
            out.append(DisaggDeployment(prefill=pools[0], decode=pools[1], link=link))
        except KvplanError:
            continue
    return out


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
