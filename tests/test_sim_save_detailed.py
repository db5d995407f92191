"""--save-result writes vLLM's summary; --save-detailed adds the per-request lists, as
`vllm bench serve` does (vllm/benchmarks/serve.py, vllm-project/vllm at 009e6d4: without
--save-detailed it drops input_lens, output_lens, start_times, ttfts, itls, generated_texts
and errors)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.analysis.metrics import PER_REQUEST_KEYS
from tests.conftest import assert_one_line_error, run_cli

SIM = ("simulate", "meta-llama/Llama-3.2-1B", "--gpu", "H100", "--num-prompts", "20",
       "--random-input-len", "256", "--random-output-len", "16", "--request-rate", "10")
VLLM_PER_REQUEST = {"input_lens", "output_lens", "ttfts", "itls", "errors"}


def _save(tmp_path: Path, name: str, *extra: str) -> dict[str, object]:
    r = run_cli(*SIM, "--save-result", str(tmp_path / name), *extra, "--json")
    assert r.code == 0, r.err
    saved = json.loads((tmp_path / name).read_text())
    assert isinstance(saved, dict)
    return saved


def test_summary_by_default_and_lists_with_save_detailed(tmp_path: Path) -> None:
    summary = _save(tmp_path, "s.json")
    detailed = _save(tmp_path, "d.json", "--save-detailed")
    assert set(PER_REQUEST_KEYS) >= VLLM_PER_REQUEST
    assert set(detailed) - set(summary) == set(PER_REQUEST_KEYS)
    assert {k: v for k, v in detailed.items() if k not in PER_REQUEST_KEYS} == summary
    for key in ("completed", "duration", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                "output_throughput", "total_input_tokens", "request_rate", "kv_usage",
                "rejected_by_reason", "overload"):
        assert key in summary, key
    assert len(detailed["ttfts"]) == len(detailed["itls"]) == 20  # type: ignore[arg-type]
    assert detailed["completed"] == 20


def test_save_detailed_needs_save_result() -> None:
    r = run_cli(*SIM, "--save-detailed")
    assert_one_line_error(r)
    assert "give --save-result too" in r.err


def test_a_summary_file_calibrates(tmp_path: Path) -> None:
    """calibrate reads the summary: lengths from total tokens / completed
    (docs/formulas-latency.md)."""
    _save(tmp_path, "s.json")
    r = run_cli("calibrate", str(tmp_path / "s.json"), "--gpu", "H100", "--force", "--json")
    assert r.code == 0, r.err
    assert r.json()["points"]


def test_azure_conv_summary_is_small(tmp_path: Path) -> None:
    """Before: 114,335,395 bytes (the per-request ITLs of 19,366 requests); measured after:
    166,082 bytes, mostly the 2,000-bin kv_usage series."""
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dataset",
                "azure-conv", "--save-result", str(tmp_path / "az.json"), "--json")
    assert r.code == 0, r.err
    assert (tmp_path / "az.json").stat().st_size < 512 * 1024
