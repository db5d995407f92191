"""The disaggregated serving layer on real catalog models: the docs' TP4 -> TP8 example,
the pools' plans, and the link-vs-SLO check."""

from __future__ import annotations

import re

import numpy as np
import pytest

from kvplan.analysis.disagg.serving import link_slo_note, plan_pool, transfer_cost
from kvplan.errors import DoesNotFitError, InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.serving import EngineConfig


def _fleet(model: str, tp_p: int, tp_d: int, link: str = "ib-ndr", mml: int = 8192,
           x: int = 1, y: int = 1) -> DisaggDeployment:
    m, g = load_model(model), load_gpu("H100")
    pools = [Deployment(model=m, gpu=g, replicas=n,
                        engine=EngineConfig(tensor_parallel_size=tp, max_model_len=mml))
             for tp, n in ((tp_p, x), (tp_d, y))]
    return DisaggDeployment(prefill=pools[0], decode=pools[1], link=load_link(link))


def test_llama_70b_tp4_to_tp8_over_ib_ndr() -> None:
    """docs/disaggregation.md, worked example: 4,096 prompt tokens, 160 MiB per decode GPU,
    1.25 GiB over the link, 6.7108864 ms on the wire + 5 us."""
    dd = _fleet("meta-llama/Llama-3.1-70B", 4, 8)
    cost = transfer_cost(dd, plan_pool("decode", dd.decode).plan)
    p = np.array([4096])
    assert int(cost.rank_bytes(p)[0]) == 160 * 2**20
    assert int(cost.link_bytes(p)[0]) == 1_342_177_280
    assert cost.transfer_s(1_342_177_280) == pytest.approx(6.7158864e-3, rel=1e-12)


def test_same_tp_both_sides_is_the_aggregated_kv() -> None:
    """Llama-2-7B fp16 (512 KiB per token on one GPU): TP1 -> TP1 moves 512 KiB x 16 per page."""
    dd = _fleet("meta-llama/Llama-2-7b-hf", 1, 1, mml=4096)
    cost = transfer_cost(dd, plan_pool("decode", dd.decode).plan)
    assert cost.link_bytes(np.array([16, 17])).tolist() == [16 * 512 * 1024, 32 * 512 * 1024]


def test_decode_pool_uses_no_prefix_cache_and_names_its_role() -> None:
    dd = _fleet("meta-llama/Llama-3.1-8B", 1, 1)
    assert plan_pool("decode", dd.decode).limits.prefix_caching is False
    assert plan_pool("prefill", dd.prefill).limits.prefix_caching is True
    small = Deployment(model=load_model("meta-llama/Llama-3.1-8B"), gpu=load_gpu("L4"),
                       engine=EngineConfig())
    with pytest.raises(DoesNotFitError, match=r"^decode pool \(L4, TP1\): one request"):
        plan_pool("decode", small)


def test_link_slo_note() -> None:
    """Llama-3.1-8B, 8,192 tokens x 128 KiB = 1 GiB: 21.47 ms + 5 us on ib-ndr. Under 20 ms:
    (0.020 - 5e-6) s / (131,072 B / 50e9 B/s per token) = 7,627.5 tokens, down to whole
    16-token pages: 7,616."""
    dd = _fleet("meta-llama/Llama-3.1-8B", 1, 1)
    plan = plan_pool("decode", dd.decode).plan
    assert link_slo_note(dd, plan, 22.0, 8192) is None  # in time: nothing to say
    msg = link_slo_note(dd, plan, 20.0, 8192)
    assert msg is not None
    assert re.search(r"\(8,192 tokens, 1\.00 GiB\) in 21\.5 ms, over the TTFT goodput of 20 ms"
                     r".*links that fit: nvlink4, ib-xdr, pcie5-x16; "
                     r"or prompts of at most 7,616 tokens", msg), msg


def test_kv_connector_layout_unifies_windows_and_refuses_state_layers() -> None:
    """vLLM disables the hybrid KV cache manager under --kv-transfer-config: gemma-3's
    sliding layers cache like full ones (same pages, one group); an all-sliding model
    (Mistral-7B-v0.1) stays as it is; a Mamba/linear hybrid cannot start."""
    from kvplan.specs.disagg import kv_transfer_model

    gemma = kv_transfer_model(load_model("google/gemma-3-27b-it"))
    assert set(gemma.layer_kinds) == {"full"}
    mistral = load_model("mistralai/Mistral-7B-v0.1")
    assert kv_transfer_model(mistral) is mistral
    with pytest.raises(InputError, match="mixes attention and state layers"):
        kv_transfer_model(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    dd = _fleet("google/gemma-3-27b-it", 1, 1)
    plan = plan_pool("decode", dd.decode).plan
    assert len(plan.groups) == 1 and len(plan.groups[0].layer_ids) == 62
