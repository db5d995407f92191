"""Calibration points are priced with the host overlap their engine ran by default:
vLLM's async scheduling from 0.14.0 (PR #27614), SGLang's overlap scheduler (v0.4+)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.analysis.calibration.engine_versions import month_of, runs_async, vllm_version
from kvplan.analysis.calibration.public_set import engine_key
from kvplan.input_file import package_file


@pytest.mark.parametrize(("text", "want"), [
    ("v0.11.0", (0, 11, 0)), ("v0.19.1 ('after (v0.19.1)' in the post's Table 3)", (0, 19, 1)),
    ("rocm/vllm:rocm7.0.0_vllm_0.10.2_20251006", (0, 10, 2)),  # not ROCm's 7.0.0
    ("v0.17.0 (vllm/vllm-openai-rocm:v0.17.0)", (0, 17, 0)),
    ("main at the PR's base (Aug 2025; not printed)", None), ("not stated (2024 blog)", None)])
def test_vllm_version(text: str, want: tuple[int, int, int] | None) -> None:
    assert vllm_version(text) == want


@pytest.mark.parametrize(("text", "want"), [
    ("main at the PR's base (Aug 2025; not printed)", "2025-08"),
    ("the PR's branch (June 2026; not printed)", "2026-06"),
    ("not stated (issue comment 2025-07-18)", "2025-07-18"), ("v0.11.0", None)])
def test_month_of(text: str, want: str | None) -> None:
    assert month_of(text) == want


@pytest.mark.parametrize(("engine", "version", "date", "printed", "want"), [
    ("vllm", "v0.13.0", None, None, False), ("vllm", "v0.14.0", None, None, True),
    ("vllm", "v0.11.0", None, True, True),  # --async-scheduling printed on the page
    ("vllm", "v0.19.1", None, False, False),  # --no-async-scheduling printed
    ("vllm", "main at the PR's base (Nov 2025; not printed)", "2025-11-19", None, False),
    ("vllm", "the PR's branch (June 2026; not printed)", "2026-06-03", None, True),
    ("vllm", "nightly wheel", "2026-01-20", None, True),
    ("vllm", "not stated (2024 blog)", None, None, False),
    ("sglang", "v0.5.3", None, None, True), ("trtllm", "v0.6.1", None, None, False)])
def test_runs_async(engine: str, version: str, date: str | None, printed: bool | None,
                    want: bool) -> None:
    assert runs_async(engine, version, date, printed) is want


@given(st.integers(0, 40), st.integers(0, 9))
def test_the_version_rule_is_a_threshold(minor: int, patch: int) -> None:
    assert runs_async("vllm", f"v0.{minor}.{patch}") is (minor >= 14)


def test_the_bundled_set() -> None:
    """The set's runs of vLLM 0.17.0 / 0.19.1 / a June 2026 branch and every SGLang run are
    priced with host overlap; vLLM 0.11.0 runs are not unless their page printed the flag."""
    data = json.loads(package_file("data", "measurements", "public_calibration.json")
                      .read_text("utf-8"))
    on = {p["id"]: runs_async(engine_key(p["engine"]), p["engine_version"], p.get("date"),
                              p["engine_args"].get("async_scheduling")) for p in data["points"]}
    assert on["semianalysis-deepseek-r1-h200-sglang-tp8-c8"]
    assert on["gpustack-deepseek-r1-h200-sglang-L123"]
    assert on["vllm-blog-fp8kv-gpt-oss-20b-bf16-h100-c8"]  # v0.19.1
    assert on["gpustack-gpt-oss-120b-a100-L205"]  # v0.11.0, --async-scheduling printed
    assert not on["gpustack-gpt-oss-20b-h100-L88"]  # v0.11.0, vllm serve openai/gpt-oss-20b
    assert not on["gpustack-qwen3-8b-h100-latency-L617"]
