"""Hunt 17 (dis17): prefill/decode disaggregation's fleet prices and link arithmetic."""

from __future__ import annotations

import pytest

from kvplan.analysis.disagg.plan import enumerate_disagg
from kvplan.analysis.disagg.screen import pool_costs
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.prices import price_table
from kvplan.specs.serving import EngineConfig

MODEL = "meta-llama/Llama-3.1-8B"


def _fleet(link: str, label: str, gpus: tuple[str, str] = ("H100", "H100")):
    fleets = enumerate_disagg(load_model(MODEL), [load_gpu(g) for g in dict.fromkeys(gpus)],
                              EngineConfig(max_model_len=4096), load_link(link), tps=(1,),
                              max_instances=2)
    gp, gd = (load_gpu(g).id for g in gpus)
    return next(f for f in fleets if f.label == label and f.prefill.gpu.id == gp
                and f.decode.gpu.id == gd)


@pytest.mark.parametrize(("provider", "link", "label", "usd"), [
    # Lambda's price rows (data/prices): "1x H100 SXM" is a 1-GPU node ($4.29/h), "8x H100
    # SXM" an 8-GPU NVLink node ($31.92/h). A 1P1D TP1 over nvlink4 needs both GPUs in one
    # node: one 8x node, $31.92/h (was two 1x instances, $8.58/h: no NVLink between them).
    ("lambda", "nvlink4", "1P1D", 31.92),
    # Nebius rents only 8-GPU HGX nodes ($30.80/h): a 2P2D TP1 (4 GPUs) fits one node,
    # $30.80/h (was one node per pool, $61.60/h).
    ("nebius", "nvlink4", "2P2D", 30.80),
    # RunPod's 1-GPU rentals sit on 8-GPU nodes (gpus_per_node 8): 2 x $3.99 = $7.98/h.
    ("runpod-secure", "nvlink4", "1P1D", 7.98),
    # A network link: each pool rents its own instances, as before (2 x $4.29 on Lambda).
    ("lambda", "ib-ndr", "1P1D", 8.58),
])
def test_a_node_link_fleet_is_priced_as_one_node(provider: str, link: str, label: str,
                                                  usd: float) -> None:
    costs = pool_costs(_fleet(link, label), price_table(provider))
    assert costs is not None
    assert sum(c.usd_per_hour for c in costs) == pytest.approx(usd)


def test_a_node_link_fleet_on_one_gpu_nodes_only_is_unpriced() -> None:
    """GCP's a3-highgpu-1g is a 1-GPU node (the only H100 row there): no shape holds a 1P1D
    over nvlink4 in one node (was 2 x $10.98 = $21.96/h)."""
    assert pool_costs(_fleet("nvlink4", "1P1D"), price_table("gcp")) is None


def test_a_node_link_fleet_mixing_gpu_models_is_unpriced() -> None:
    """No price row is a node of H100s and H200s (was one H100 and one H200 rental)."""
    assert pool_costs(_fleet("nvlink4", "1P1D", ("H100", "H200")),
                      price_table("runpod-secure")) is None


def test_the_price_note_names_the_node_links_one_rental() -> None:
    """The plan's 'pricing:' line said only 'each pool rents its own instances', which a node
    link's fleet no longer does (one rental whose node holds both pools)."""
    from kvplan.analysis.disagg.joint_doc import PRICE_NOTE

    assert "node link's fleet (NVLink, PCIe) one rental whose node holds both pools" in PRICE_NOTE
