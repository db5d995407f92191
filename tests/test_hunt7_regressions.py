"""Seventh hunt round (the web page, its API and the HTML report): each defect pinned by a
hand-checkable golden value."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings
from tests.conftest import run_cli

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=60)))


# -------------------- D1: plan --disagg read the plan's lists as plain whole numbers
# `kvplan plan --max-num-batched-tokens 8K` is vLLM's 8,192 (human_readable_int); with
# --disagg the joint side re-read the same lists with int(), so the run planned the aggregated
# space and then died: "error: --max-num-batched-tokens: '8K' is not a valid value", exit 2.
PLAN_DISAGG = ("plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "50",
               "--request-rate", "2", "--slo", "ttft:p99:2000", "--disagg", "--json")


def test_plan_disagg_reads_8K_as_vllm_does() -> None:
    suffixed = run_cli(*PLAN_DISAGG, "--max-num-batched-tokens", "8K")
    assert suffixed.code == 0, suffixed.err
    doc = suffixed.json()
    assert "--max-num-batched-tokens 8192" in doc["summary"]["vllm_serve"]  # 8 x 1024
    plain = run_cli(*PLAN_DISAGG, "--max-num-batched-tokens", "8192")
    assert plain.code == 0, plain.err
    assert _timeless(doc) == _timeless(plain.json())


def _timeless(doc: Any) -> Any:
    """The answer without its wall-clock timings (``wall_s``)."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k != "wall_s"}
    return [_timeless(v) for v in doc] if isinstance(doc, list) else doc
