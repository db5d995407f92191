"""`kvplan gpus --json` gives each GPU's scale-up link rate and architecture, which the
planner's TP pricing and the donor rules read (they were left out)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_link_rate_and_architecture() -> None:
    gpus = {g["id"]: g for g in run_cli("gpus", "--json").json()["gpus"]}
    # the datasheets' figures, both directions: NVLink 4 900 GB/s, PCIe Gen4 x16 64 GB/s
    assert gpus["H100-SXM-80GB"]["interconnect_bytes_per_s"] == 900_000_000_000
    assert gpus["L40S"]["interconnect_bytes_per_s"] == 64_000_000_000
    assert isinstance(gpus["L40S"]["interconnect_bytes_per_s"], int)
    assert gpus["H100-SXM-80GB"]["arch"] == "Hopper (GH100)"
    assert gpus["MI300X"]["arch"] == "CDNA 3"
