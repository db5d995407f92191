"""Price table: sources and dates on every row, overrides, files, staleness, instance shapes."""

import datetime as dt
from pathlib import Path

import pytest

from kvplan.costs.pricing import fleet_cost, shape_cost
from kvplan.errors import InputError, KvplanError
from kvplan.specs.prices import (
    COLUMNS,
    PriceRow,
    bundled_rows,
    load_price_file,
    parse_price,
    price_table,
)

TODAY = dt.date(2026, 12, 1)


def test_every_bundled_row_has_a_source_and_a_date() -> None:
    rows = bundled_rows()
    assert len(rows) >= 25
    for r in rows:
        assert r.source_url.startswith("https://") and r.transcribed_by
        dt.date.fromisoformat(r.observed_on)
        assert r.usd_per_instance_hour > 0


def test_bundled_values_from_the_research_table() -> None:
    lam = price_table("lambda", today=TODAY)
    h100 = {r.instance: r for r in lam.for_gpu("H100-SXM-80GB")}
    assert h100["8x H100 SXM"].usd_per_gpu_hour == pytest.approx(3.99)
    assert h100["1x H100 SXM"].usd_per_gpu_hour == pytest.approx(4.29)
    aws = price_table("aws", today=TODAY).for_gpu("H100-SXM-80GB")[0]
    assert aws.usd_per_gpu_hour == pytest.approx(55.04 / 8)
    assert price_table(today=TODAY).provider == "runpod-secure"
    assert price_table(today=TODAY).stale_rows(TODAY) == ()


def test_price_override_replaces_the_gpu_rows() -> None:
    t = price_table("lambda", overrides=["H100=2.49"], today=TODAY)
    (row,) = t.for_gpu("H100-SXM-80GB")
    assert row.override and row.usd_per_gpu_hour == 2.49 and row.source_url == "--price"
    assert parse_price("a100-80gb=1.5") == ("A100-80GB-SXM", 1.5)


@pytest.mark.parametrize("bad", ["H100", "H100=", "H100=abc", "H100=-1", "=2", "H100=inf"])
def test_malformed_price_strings(bad: str) -> None:
    with pytest.raises(InputError, match="--price"):
        parse_price(bad)


def test_unknown_gpu_in_a_price_is_an_error() -> None:
    with pytest.raises(KvplanError, match="unknown GPU"):
        parse_price("H900=2")


def test_unknown_provider() -> None:
    with pytest.raises(InputError, match="choose one of"):
        price_table("nope")


def _csv(tmp_path: Path, rows: list[str]) -> Path:
    p = tmp_path / "prices.csv"
    p.write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return p


def test_price_file_and_staleness(tmp_path: Path) -> None:
    p = _csv(tmp_path, ["H100,acme,8x,8,8,16.0,https://acme.example/p,2026-08-01,me",
                        "L40S,acme,1x,1,1,0.5,https://acme.example/p,2026-11-30,me"])
    rows = load_price_file(p)
    assert all(r.override for r in rows)
    t = price_table("acme", prices_file=p, today=TODAY)
    assert t.gpus == ("H100-SXM-80GB", "L40S")
    assert [r.gpu for r in t.stale_rows(TODAY)] == ["H100-SXM-80GB"]  # 122 days old
    stale_row = PriceRow(gpu="L40S", provider="x", instance="i", gpus_per_instance=1,
                         gpus_per_node=1, usd_per_instance_hour=1.0, source_url="u",
                         observed_on="2026-09-01")
    assert stale_row.age_days(TODAY) == 91


def test_bad_price_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("gpu,provider\nH100,x\n")
    with pytest.raises(InputError, match="missing price column"):
        load_price_file(p)
    p2 = _csv(tmp_path, ["H100,acme,8x,8,8,-3,https://a,2026-08-01,me"])
    with pytest.raises(InputError, match="positive"):
        load_price_file(p2)
    with pytest.raises(InputError, match="cannot read"):
        load_price_file(tmp_path / "missing.csv")


def _row(gpi: int, node: int, usd: float) -> PriceRow:
    return PriceRow(gpu="H100-SXM-80GB", provider="p", instance=f"{gpi}x", gpus_per_instance=gpi,
                    gpus_per_node=node, usd_per_instance_hour=usd, source_url="u",
                    observed_on="2026-11-01")


def test_instance_shapes() -> None:
    # 3 replicas of TP2 on 8-GPU nodes: one node, 2 GPUs idle
    c = shape_cost(_row(8, 8, 32.0), 3, 2)
    assert c is not None and (c.instances, c.idle_gpus, c.usd_per_hour) == (1, 2, 32.0)
    # 5 replicas of TP2: two nodes
    c = shape_cost(_row(8, 8, 32.0), 5, 2)
    assert c is not None and (c.instances, c.idle_gpus) == (2, 6)
    # per-GPU rental combined into 8-GPU nodes: 3 x TP4 = 12 GPUs
    c = shape_cost(_row(1, 8, 4.0), 3, 4)
    assert c is not None and (c.instances, c.usd_per_hour) == (12, 48.0)
    # a 1-GPU-only shape cannot hold a TP2 replica
    assert shape_cost(_row(1, 1, 4.0), 1, 2) is None
    best = fleet_cost((_row(8, 8, 32.0), _row(1, 1, 4.29)), 1, 1)
    assert best is not None and best.usd_per_hour == 4.29
