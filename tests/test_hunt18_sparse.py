"""DeepSeek-V3.2 (sparse MLA, ``index_topk``) on a GPU vLLM cannot run it on: vLLM 0.11 sends
sparse MLA to FlashMLASparse only, whose kernels are built for SM 9.0 and 10.0. kvplan priced
it on A100 and L40S (found by hunt18's capacity helper); it now refuses in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from tests.test_hunt14_mla import _v32_config


@pytest.mark.parametrize("gpu", ["A100", "L40S"])
def test_v32_is_refused_before_hopper(tmp_path: Path, gpu: str) -> None:
    r = run_cli("capacity", _v32_config(tmp_path), "--gpu", gpu, "-tp", "8")
    assert_one_line_error(r)
    assert "FlashMLASparse" in r.err and "Hopper or Blackwell" in r.err


@pytest.mark.parametrize("gpu", ["H200", "B200"])
def test_v32_still_runs_on_hopper_and_blackwell(tmp_path: Path, gpu: str) -> None:
    r = run_cli("capacity", _v32_config(tmp_path), "--gpu", gpu, "-tp", "8")
    assert r.code == 0, r.err


def test_dense_mla_still_runs_on_a100(tmp_path: Path) -> None:
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V3", "--gpu", "A100", "-tp", "8", "-pp", "2")
    assert r.code == 0, r.err
