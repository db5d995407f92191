"""fuzz-2 F3: every --json print and saved result is strict JSON (no NaN/Infinity); an
infinite request rate is written "inf", as ``vllm bench serve`` writes it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from kvplan.report.json_out import dumps
from tests.fuzz2_support import L1B, assert_ok, run_case, strict_json

SIM = ["simulate", L1B, "--num-prompts", "3"]


@pytest.mark.parametrize("rate", ["inf", "Infinity", "INF"])
def test_f3_request_rate_inf_prints_the_string_inf(rate: str, tmp_path: Path) -> None:
    doc = assert_ok(run_case(tmp_path, [*SIM, "--request-rate", rate, "--json"]), as_json=True)
    assert doc["request_rate"] == "inf"


def test_f3_saved_result_is_strict_json_too(tmp_path: Path) -> None:
    result = run_case(tmp_path, [*SIM, "--request-rate", "inf", "--save-result", "r.json"])
    assert "wrote r.json" in assert_ok(result)
    saved = strict_json((tmp_path / "r.json").read_text())
    assert saved["request_rate"] == "inf" and saved["completed"] == 3


def test_f3_a_finite_rate_stays_a_number(tmp_path: Path) -> None:
    doc = assert_ok(run_case(tmp_path, [*SIM, "--request-rate", "2.5", "--json"]), as_json=True)
    assert doc["request_rate"] == 2.5


@pytest.mark.parametrize("args", [
    ["kv", L1B, "--json"], ["capacity", L1B, "--json"], ["gpus", "--json"],
    ["latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "8", "--json"],
    ["latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "1", "--json"],
    ["request", L1B, "--prompt", "64", "--output", "4", "--json"],
    ["batch", L1B, "--batch", "4", "--context", "256", "--json"],
    ["levers", L1B, "--batch", "4", "--context", "256", "--json"],
], ids=lambda a: a[0] + ("-o1" if a[-2:] == ["1", "--json"] else ""))
def test_f3_every_json_command_prints_one_strict_object(args: list[str], tmp_path: Path) -> None:
    result = run_case(tmp_path, args)
    assert_ok(result, as_json=True)
    assert not result.err


def test_dumps_turns_infinities_into_strings_and_nan_into_null() -> None:
    doc = {"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": np.float64("inf"),
           "d": np.arange(3), "e": (np.int64(7), 2)}
    text = dumps(doc, indent=None)
    assert json.loads(text) == {"a": "inf", "b": ["-inf", None, 1.5], "c": "inf",
                                "d": [0, 1, 2], "e": [7, 2]}
    assert "Infinity" not in text and "NaN" not in text
