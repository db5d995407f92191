"""H800: the catalog's H100 SXM with its NVLink cut to 400 GB/s, priced from H100's measured
kernel tables (``kernels_of``), its collectives at 900 / 400 = 2.25x the bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.specs.hardware import load_gpu
from tests.conftest import assert_one_line_error, run_cli

H100, H800 = "H100-SXM-80GB", "H800-SXM-80GB"


def test_catalog_entry_and_aliases() -> None:
    gpu = load_gpu("H800")
    assert gpu.id == H800 and load_gpu("nvidia h800").id == H800
    assert gpu.kernels_of == H100
    h100 = load_gpu(H100)
    # the same die and HBM: every rate but the scale-up link is H100 SXM's
    assert (gpu.memory_bytes, gpu.mem_bw_bytes_per_s, gpu.peak_flops) == (
        h100.memory_bytes, h100.mem_bw_bytes_per_s, h100.peak_flops)
    assert (gpu.interconnect_bytes_per_s, h100.interconnect_bytes_per_s) == (400e9, 900e9)
    assert gpu.scale_out_bytes_per_s == 50e9


def test_kernels_are_h100s_tables() -> None:
    assert kn.resolve_gpu("H800") == H100 and kn.has_tables("H800")
    tokens = np.array([1, 64, 4096])
    assert np.array_equal(kn.gemm_s("H800", tokens, 8192, 8192),
                          kn.gemm_s(H100, tokens, 8192, 8192))
    assert kn.link_scale(H800) == 2.25 and kn.link_scale(H100) == 1.0


def test_collectives_read_at_the_link_ratio() -> None:
    """All-reduce of m bytes on H800 = H100's measured all-reduce of 2.25 m bytes (exactly),
    never faster than H100's of m; the answer says so."""
    sizes = np.array([2**12, 2**20, 2**24, 2**27], dtype=np.float64)
    h800 = kn.all_reduce("H800", sizes, 8)
    assert np.array_equal(h800.seconds, kn.all_reduce_s(H100, sizes * 2.25, 8))
    assert np.all(h800.seconds >= kn.all_reduce_s(H100, sizes, 8))
    assert any("2.25x the bytes" in n for n in h800.notes)
    assert np.all(kn.all_reduce_s("H800", sizes, 1) == 0.0)


def _latency(gpu: str, tp: int, batch: int) -> dict[str, float]:
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "-tp", str(tp),
                "--prompt", "2048", "--output", "64", "--batch", str(batch), "--json")
    assert r.code == 0, r.err
    return {k: r.json()[k] for k in ("ttft_s", "tpot_s")}


def test_one_gpu_is_h100_exactly() -> None:
    """TP1 has no collective: the same tables and profile give H100's answer to the bit."""
    assert _latency("H800", 1, 8) == _latency(H100, 1, 8)


@pytest.mark.parametrize("tp", [2, 8])
def test_never_faster_than_h100(tp: int) -> None:
    """Same tensor cores and HBM, a slower NVLink: never faster on any answer."""
    for batch in (1, 32):
        h800, h100 = _latency("H800", tp, batch), _latency(H100, tp, batch)
        assert all(h800[k] >= h100[k] for k in h800), (tp, batch, h800, h100)
    assert _latency("H800", tp, 1)["ttft_s"] > _latency(H100, tp, 1)["ttft_s"]


def test_capacity_is_h100s() -> None:
    def blocks(gpu: str) -> int:
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--json")
        assert r.code == 0, r.err
        return int(r.json()["num_blocks"])

    assert blocks("H800") == blocks(H100)


def test_explain_names_the_twin_and_coverage() -> None:
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H800", "-tp", "2",
                "--prompt", "512", "--output", "8")
    assert r.code == 0, r.err
    text = " ".join(r.out.split() + r.err.split())
    assert f"kernels measured on {H100}" in text
    assert f"{H800} is the same die" in text and "2.25x slower" in text
    assert f"it is priced as {H100}" in text


def test_kernels_of_in_a_gpu_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text("id: Mine\nmemory_gb: 80\nmem_bw_tbps: 3.35\nbf16_tflops_dense: 989\n"
                 "kernels_of: H100-SXM-80GB\n")
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", str(f))
    assert_one_line_error(r)
    assert "kernels_of" in r.err
