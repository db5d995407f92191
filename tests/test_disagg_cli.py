"""kvplan simulate on a disaggregated fleet: golden text lines, JSON keys and values, errors.

Hand-checkable figures: Llama-3.1-8B bf16 holds 32 layers x 8 KV heads x 128 x 2 (K, V) x
2 B = 131,072 B per token on one GPU; at decode TP2 each decode GPU holds half (65,536 B).
A 512-token prompt is 32 pages of 16 tokens, so the link moves 2 x 32 x 16 x 65,536 =
67,108,864 B (64 MiB) per request, in 67,108,864 / (min(1, 2) x 50e9 B/s) = 1.34217728 ms
plus ib-ndr's 5 us latency: 1.34717728 ms.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_one_line_error, run_cli

BASE = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "4",
        "--random-input-len", "512", "--random-output-len", "8", "--request-rate", "10")
FLEET = ("--disagg", "1P1D", "--decode-tp", "2", "--kv-link", "ib-ndr")


def test_json_is_vllm_bench_shaped_with_the_fleets_keys(tmp_path) -> None:
    out = tmp_path / "r.json"
    r = run_cli(*BASE, *FLEET, "--save-result", str(out), "--save-detailed", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    for key in ("completed", "duration", "mean_ttft_ms", "p99_tpot_ms", "mean_itl_ms",
                "output_throughput", "total_token_throughput"):
        assert key in doc, key
    assert doc["completed"] == 4 and doc["failed"] == 0
    assert (doc["backend"], doc["disagg"], doc["kv_link"], doc["router"]) == (
        "kvplan-sim-disagg", "1P1D", "ib-ndr", "round-robin")
    assert doc["prefill"]["tensor_parallel_size"] == 1
    assert doc["decode"]["tensor_parallel_size"] == 2
    assert doc["decode"]["enable_prefix_caching"] is False
    assert doc["kv_transfers"] == 4
    assert doc["kv_link_bytes"] == 4 * 67_108_864
    assert doc["mean_kv_transfer_ms"] == pytest.approx(1.34717728, rel=1e-12)
    assert doc["p99_kv_transfer_ms"] == pytest.approx(1.34717728, rel=1e-12)
    # TTFT >= the transfer; the prefill held each prompt's 32 blocks at least that long
    assert doc["mean_ttft_ms"] > doc["mean_kv_transfer_ms"]
    assert doc["mean_prefill_kv_hold_ms"] >= doc["mean_kv_transfer_ms"]
    assert doc["prefill_peak_kv_blocks"] % 32 == 0
    assert {"prefill", "decode"} == set(doc["kv_usage_by_pool"])
    saved = json.loads(out.read_text())
    assert saved["kv_link_bytes"] == doc["kv_link_bytes"]
    assert saved["input_lens"] == [512] * 4 and len(saved["itls"]) == 4
    assert all(len(x) == 7 for x in saved["itls"])  # 8 output tokens: 7 gaps each
    assert 1000 * sum(saved["ttfts"]) / 4 == pytest.approx(doc["mean_ttft_ms"], rel=1e-12)
    assert "ttfts" not in doc


def test_text_view_golden_lines() -> None:
    r = run_cli(*BASE, *FLEET)
    assert r.code == 0, r.err
    text = r.out
    assert "1P1D over ib-ndr: 3 GPUs" in text
    lines = {" ".join(x.replace("│", " ").split()) for x in text.splitlines()}
    assert "Prefill pool 1 x H100-SXM-80GB TP1" in lines
    assert "Decode pool 1 x H100-SXM-80GB TP2" in lines
    assert "KV moved over the link 256.00 MiB in 4 transfers" in lines
    assert "Mean / P99 KV transfer 1.35 ms / 1.35 ms" in lines
    assert "Requests that waited for decode blocks 0" in lines
    assert "Successful requests 4" in lines


def test_compact_and_long_forms_agree() -> None:
    a = run_cli(*BASE, "--disagg", "2P1D", "--json")
    b = run_cli(*BASE, "--prefill-instances", "2", "--decode-instances", "1", "--json")
    assert a.code == b.code == 0, (a.err, b.err)
    da, db = a.json(), b.json()
    da.pop("kv_usage_by_pool"), db.pop("kv_usage_by_pool")
    assert da == db and da["disagg"] == "2P1D" and da["kv_link"] == "ib-ndr"


@pytest.mark.parametrize(("extra", "words"), [
    (("--disagg", "1P1D", "--kv-link", "carrier-pigeon"), "choose one of nvlink4, ib-ndr"),
    (("--disagg", "1Q1D"), "write xPyD"),
    (("--disagg", "1P1D", "--prefill-instances", "2"), "give one"),
    (("--disagg", "1P1D", "--decode-gpu", "L4"), "decode pool (L4, TP1)"),
    (("--disagg", "4P5D", "--kv-link", "nvlink4"), "use a network link"),
    (("--disagg", "1P1D", "--decode-tp", "3"), "--decode-tp 3 must divide"),
    (("--disagg", "1P1D", "--max-concurrency", "2"), "--max-concurrency"),
    (("--disagg", "1P1D", "--prefill-tp", "2"), "--decode-tp 1 must be a multiple of"),
    (("--disagg", "1P1D", "--plot", "kv.svg"), "--plot"),
    (("--router", "least-outstanding"), "give --disagg xPyD"),
    (("--disagg", "2P1D", "--router", "random"), "round-robin or least-outstanding"),
])
def test_bad_input_is_one_line_exit_2(extra, words) -> None:
    r = run_cli(*BASE, *extra)
    assert_one_line_error(r)
    assert words in r.err, r.err


def test_decode_pool_error_says_what_fits() -> None:
    r = run_cli(*BASE, "--disagg", "1P1D", "--decode-gpu", "L4")
    assert_one_line_error(r)
    assert "the largest --max-model-len that fits is" in r.err


def test_a_goodput_the_link_cannot_meet_is_a_note_not_a_refusal() -> None:
    """The workload's longest prompt, 512 tokens, moves 64 MiB: 1.34 ms + 5 us on ib-ndr
    (50 GB/s per GPU), over a 1 ms TTFT goodput. vLLM's benchmark runs and counts no request
    good; the simulation does the same (it refused to start when one 131,072-token request (16 GiB,
    343.6 ms), which this workload never sends, missed the goodput)."""
    r = run_cli(*BASE, "--disagg", "1P1D", "--goodput", "ttft:1", "--json")
    assert r.code == 0, r.err
    assert "note: --kv-link ib-ndr moves the longest prompt's KV (512 tokens, 64.00 MiB) " \
           "in 1.3 ms, over the TTFT goodput of 1 ms" in r.err, r.err
    # (1e-3 - 5e-6) s x 50e9 B/s / 131,072 B = 379.6 tokens: 368 in whole 16-token pages;
    # ib-xdr (100e9) reaches an H100 over its PCIe Gen5 x16, 64e9 x 128/130 = 63.0e9 a
    # direction: 67,108,864 B in 1.065 ms + 5 us, over 1 ms
    assert "links that fit: nvlink4; or prompts of at most 368 tokens" in r.err
    assert json.loads(r.out)["request_goodput"] == 0.0
    ok = run_cli(*BASE, "--disagg", "1P1D", "--goodput", "ttft:300", "--json")
    assert ok.code == 0 and "note:" not in ok.err, ok.err


