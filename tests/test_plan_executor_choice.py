"""--executor auto takes Ray only for a large plan on a cluster; --executor ray says, in one
note, when it is expected to be slower than local (docs/planner.md, Execution)."""

from __future__ import annotations

import logging

import pytest

from kvplan.analysis.plan.executor import RAY_MIN_SCREENED, executor_choice, pick_executor
from kvplan.errors import InputError


def test_auto_is_local_on_this_machine_and_ray_on_a_cluster_for_a_large_plan() -> None:
    assert executor_choice("auto", None, 10_000) == ("local", "")
    assert executor_choice("auto", "ray://head:10001", RAY_MIN_SCREENED - 1) == ("local", "")
    assert executor_choice("auto", "ray://head:10001", RAY_MIN_SCREENED) == ("ray", "")


def test_explicit_choices_are_kept_and_ray_says_when_it_is_slower() -> None:
    assert executor_choice("local", "ray://head:10001", 10_000) == ("local", "")
    assert executor_choice("ray", "ray://head:10001", RAY_MIN_SCREENED) == ("ray", "")
    name, note = executor_choice("ray", None, 10_000)
    assert name == "ray" and "expected to be slower than local" in note
    assert "without --ray-address" in note and "\n" not in note
    name, note = executor_choice("ray", "ray://head:10001", 20)
    assert name == "ray" and f"20 screened candidates, below the {RAY_MIN_SCREENED}" in note


def test_the_note_is_logged_once_and_local_runs_without_one(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kvplan")
    pick_executor("auto", 1, None, 50).close()
    assert caplog.records == []
    with pytest.raises(InputError, match="--executor 'dask': choose one of auto, local, ray"):
        pick_executor("dask", 1, None, 50)


def test_cli_ray_prints_one_note_line() -> None:
    from tests.conftest import run_cli

    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1",
                "--num-prompts", "60", "--random-input-len", "300", "--random-output-len",
                "20", "--request-rate", "2", "--sample-requests", "30",
                "--max-num-batched-tokens", "default", "--slo", "ttft:p99:2000",
                "tpot:p99:100", "--executor", "ray", "--workers", "1", "--json")
    assert r.code == 0, r.err
    notes = [line for line in r.err.splitlines() if line.startswith("note: --executor ray")]
    assert notes == ["note: --executor ray is expected to be slower than local here (without "
                     "--ray-address Ray runs on this machine's cores, as local does; "
                     "docs/planner.md, Execution)"]
    assert r.json()["search_report"]["executor"] == "ray"
