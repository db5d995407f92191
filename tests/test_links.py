"""The KV link catalog: every entry sourced, bandwidths as their line rates, names refused."""

from __future__ import annotations

import pytest

from kvplan.errors import UnknownNameError
from kvplan.specs.links import link_catalog, load_link


def test_every_link_has_a_source_and_a_sane_rate() -> None:
    for link in link_catalog():
        assert link.source.strip() and "http" in link.source, link.id
        assert 1e9 <= link.bytes_per_s_per_gpu <= 1e12
        assert 0 <= link.latency_s < 1e-3


@pytest.mark.parametrize(("name", "rate"), [
    ("nvlink4", 900e9 / 2),          # 900 GB/s both directions per H100/H200 GPU
    ("nvlink3", 600e9 / 2),          # 600 GB/s both directions per A100 SXM GPU
    ("ib-ndr", 400e9 / 8),           # 400 Gb/s
    ("IB-XDR", 800e9 / 8),           # 800 Gb/s (names are case-insensitive)
    ("roce-400g", 400e9 / 8),
    ("eth-200g", 200e9 / 8),
    ("eth-100g", 100e9 / 8),
    ("pcie5-x16", 16 * 32e9 * 128 / 130 / 8),  # 63.0e9 after 128b/130b
])
def test_line_rates(name: str, rate: float) -> None:
    assert load_link(name).bytes_per_s_per_gpu == pytest.approx(rate, rel=2e-3)


def test_unknown_link_lists_the_ids() -> None:
    with pytest.raises(UnknownNameError, match="choose one of nvlink4, ib-ndr, ib-xdr"):
        load_link("token-ring")


def test_node_links_are_node_scoped() -> None:
    assert {x.id for x in link_catalog() if x.scope == "node"} == {"nvlink4", "pcie5-x16",
                                                                          "nvlink3"}
