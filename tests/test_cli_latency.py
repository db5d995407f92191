"""kvplan latency / calibrate as a user runs them: JSON keys, text reasons, one-line errors."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli

LLAMA = "meta-llama/Llama-2-7b-hf"


def test_latency_json_keys() -> None:
    r = run_cli("latency", LLAMA, "--gpu", "a100", "--prompt", "512", "--output", "64",
                "--batch", "8", "--json")
    assert r.code == 0, r.err
    data = r.json()
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_throughput_tok_s"):
        assert data[key] > 0
    assert data["prefill_bound"] == "compute" and data["decode_bound"] == "memory"
    phase = data["phases"]["decode"]
    assert set(phase) >= {"flops", "bytes", "seconds", "bound"}
    assert phase["bytes"]["weights"] > 0 and phase["seconds"]["memory_s"] > 0


def test_latency_text_explains_both_phases() -> None:
    r = run_cli("latency", LLAMA, "--gpu", "h100", "--prompt", "2048", "--output", "16")
    assert r.code == 0, r.err
    assert "prefill:" in r.out and "compute-bound" in r.out
    assert "decode:" in r.out and "memory-bound" in r.out and "ridge" in r.out


def test_sweep_marks_where_kv_stops_fitting() -> None:
    r = run_cli("latency", LLAMA, "--gpu", "a100", "--prompt", "1000", "--output", "100",
                "--sweep", "batch=1,64,1024", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["kv_no_longer_fits_at"] == "1024"
    assert [row["fits"] for row in data["rows"]] == [True, True, False]


def test_bad_input_is_one_line() -> None:
    base = ("latency", LLAMA, "--gpu", "a100", "--output", "10")
    assert_one_line_error(run_cli(*base, "--prompt", "0"))
    assert_one_line_error(run_cli(*base, "--prompt", "-5"))
    err = run_cli(*base, "--prompt", "2000", "--batch", "5000")
    assert_one_line_error(err)
    assert "KV cache" in err.err and "at most" in err.err
    assert_one_line_error(run_cli(*base, "--prompt", "10", "--sweep", "colour=red"))


def test_calibrate_bad_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "m.csv"
    bad.write_text("model,gpu,batch,prompt,output,ttft_ms\n"
                   f"{LLAMA},a100,1,128,4,nope\n")
    r = run_cli("calibrate", str(bad))
    assert_one_line_error(r)
    assert "m.csv:2" in r.err


def test_calibrate_writes_a_profile_latency_reads(tmp_path: Path) -> None:
    pts = tmp_path / "m.csv"
    pts.write_text("model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                   f"{LLAMA},a100,1,128,64,400,12\n"
                   f"{LLAMA},a100,1,2048,64,600,13\n"
                   f"{LLAMA},a100,32,512,64,900,16\n")
    out = tmp_path / "p.json"
    # TTFTs ~0.4 s over the measured kernels' ~25-200 ms push prefill_overhead_s to its
    # 20 ms cap (only overheads are fitted): refused, nothing written
    refused = run_cli("calibrate", str(pts), "--out", str(out), "--json")
    assert_one_line_error(refused)
    assert "pinned at its bound" in refused.err and "--force" in refused.err
    assert not out.exists()
    r = run_cli("calibrate", str(pts), "--out", str(out), "--json", "--force")
    assert r.code == 0, r.err
    assert "warning:" in r.err and "pinned" in r.err
    assert len(r.json()["points"]) == 6
    both = run_cli("calibrate", str(pts), "--fit-step-overhead", "--json", "--force")
    assert both.code == 0, both.err
    assert both.json()["profiles"][0]["step_overhead_s"] != 0.7e-3  # moved by the fit
    lat = run_cli("latency", LLAMA, "--gpu", "a100", "--prompt", "128", "--output", "64",
                  "--profile", str(out), "--json")
    assert lat.code == 0, lat.err
    assert lat.json()["profile"]["gpu"] == "A100-80GB-SXM"


def test_an_mla_model_on_a_gpu_without_mla_tables_is_priced_and_says_how() -> None:
    """DeepSeek-V2-Lite on A100 (no MLA table bundled) answered exit 2 before; now its MLA
    blocks stand on L40S's tables scaled by the measured attention ratio, and the answer
    says so. H100 has its own MLA tables: no such words, and A100 is slower on both phases."""
    args = ["latency", "deepseek-ai/DeepSeek-V2-Lite", "--prompt", "2048", "--output", "128",
            "--json"]
    a100 = run_cli(*args, "--gpu", "A100-80GB")
    h100 = run_cli(*args, "--gpu", "H100")
    assert a100.code == 0 and h100.code == 0, a100.err + h100.err
    a, h = a100.json(), h100.json()
    assert "no MLA table on A100-80GB-SXM" in a["kernels"] and "MLA" not in h["kernels"]
    assert a["ttft_s"] > h["ttft_s"] and a["tpot_s"] > h["tpot_s"]
