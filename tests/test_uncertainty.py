"""Error bands from calibration residuals (kvplan.costs.step.uncertainty) and the `*_band` keys
the latency and simulate answers carry."""

from __future__ import annotations

import pytest

from kvplan.costs.step import uncertainty as unc
from tests.conftest import run_cli

U = unc.Uncertainty(groups=(
    unc.BandGroup(family="moe", gpu="H100-SXM-80GB", tp="8", metric="tpot_s", n=5,
                  low_ratio=0.9, high_ratio=1.3),
    unc.BandGroup(family="moe", gpu="H100-SXM-80GB", tp="*", metric="tpot_s", n=9,
                  low_ratio=0.8, high_ratio=1.5),
    unc.BandGroup(family="moe", gpu="*", tp="*", metric="tpot_s", n=20, low_ratio=0.7,
                  high_ratio=1.6),
    unc.BandGroup(family="*", gpu="*", tp="*", metric="tpot_s", n=40, low_ratio=0.6,
                  high_ratio=1.7),
    unc.BandGroup(family="dense", gpu="A100-80GB-SXM", tp="1", metric="tpot_s", n=2,
                  low_ratio=0.99, high_ratio=1.01),
), coverage=unc.Coverage(gpus=("H100-SXM-80GB", "A100-80GB-SXM"), models=("m/a",),
                         tp=(1, 8), families=("dense", "moe")))


def test_nearest_group_with_enough_points() -> None:
    exact = unc.band_for(10.0, "tpot_s", family="moe", gpu="H100-SXM-80GB", tp=8, uncertainty=U)
    assert exact is not None and exact.as_list() == pytest.approx([9.0, 13.0])
    assert exact.basis == "moe on H100-SXM-80GB at TP8, 5 held-out points"
    tp4 = unc.band_for(10.0, "tpot_s", family="moe", gpu="H100-SXM-80GB", tp=4, uncertainty=U)
    assert tp4 is not None and tp4.as_list() == pytest.approx([8.0, 15.0])
    other = unc.band_for(10.0, "tpot_s", family="moe", gpu="L4", tp=1, uncertainty=U)
    assert other is not None and other.as_list() == pytest.approx([7.0, 16.0])
    # 2 points are too few for their own band: the dense group falls through to all families
    dense = unc.band_for(10.0, "itl_s", family="dense", gpu="A100-80GB-SXM", tp=1,
                         uncertainty=U)
    assert dense is not None and dense.as_list() == pytest.approx([6.0, 17.0])
    assert unc.band_for(1.0, "ttft_s", family="moe", gpu="L4", tp=1, uncertainty=U) is None


def test_coverage_notes_say_what_lies_outside() -> None:
    notes = unc.coverage_notes(model_id="m/b", gpu="L4", tp=16, family="moe", uncertainty=U)
    assert any("L4 is not in the calibration set" in n for n in notes)
    assert any("m/b was not measured" in n for n in notes)
    assert any("TP16 lies outside" in n for n in notes)
    assert unc.coverage_notes(model_id="m/a", gpu="H100-SXM-80GB", tp=8, family="moe",
                              uncertainty=U) == []


def test_answer_bands_keys_keep_the_answer_unit() -> None:
    out = unc.answer_bands({"mean_tpot_ms": 20.0, "mean_ttft_ms": None}, family="moe",
                           gpu="H100-SXM-80GB", tp=8, key_of=unc.SIM_KEYS, uncertainty=U)
    assert out == {"mean_tpot_ms_band": pytest.approx([18.0, 26.0]), "mean_ttft_ms_band": None}


def test_bundled_bands_cover_every_metric() -> None:
    u = unc.bundled_uncertainty()
    metrics = {g.metric for g in u.groups if (g.family, g.gpu, g.tp) == ("*", "*", "*")}
    assert metrics >= {"ttft_s", "tpot_s", "output_throughput_tok_s", "e2e_s"}
    assert all(g.low_ratio <= 1.0 <= g.high_ratio for g in u.groups)
    assert "H100-SXM-80GB" in u.coverage.gpus and "moe" in u.coverage.families


def test_latency_json_carries_bands_and_notes() -> None:
    r = run_cli("latency", "deepseek-ai/DeepSeek-V3", "--gpu", "h200", "-tp", "8",
                "--prompt", "1000", "--output", "100", "--json")
    assert r.code == 0, r.err
    d = r.json()
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_throughput_tok_s"):
        low, high = d[f"{key}_band"]
        assert low <= d[key] <= high
    assert "moe" in d["band_basis"] and d["calibration_notes"] == []
    odd = run_cli("latency", "deepseek-ai/DeepSeek-V3", "--gpu", "mi325x", "-tp", "8",
                  "--prompt", "100", "--output", "10", "--json")
    assert any("MI325X is not in the calibration set" in n
               for n in odd.json()["calibration_notes"])
    text = run_cli("latency", "deepseek-ai/DeepSeek-V3", "--gpu", "mi325x", "-tp", "8",
                   "--prompt", "100", "--output", "10")
    assert "band (10-90%)" in text.out and "note: MI325X is not in" in text.out


def test_simulate_json_carries_bands() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--num-prompts", "20",
                "--random-input-len", "256", "--random-output-len", "32", "--json")
    assert r.code == 0, r.err
    d = r.json()
    low, high = d["mean_tpot_ms_band"]
    assert low <= d["mean_tpot_ms"] <= high
    assert d["output_throughput_band"][0] <= d["output_throughput"]
    assert "dense" in d["band_basis"]
