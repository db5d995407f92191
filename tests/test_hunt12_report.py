"""`kvplan report` against the CLI's answers to the same questions (hunt 12)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"


def _sections(path: Path) -> dict[str, Any]:
    """The report's answers, by section id, from its kvplan-data script."""
    raw = re.search(r'id="kvplan-data">(.*?)</script>', path.read_text(), re.S)
    assert raw is not None
    data = json.loads(raw.group(1).replace("<\\/", "</"))
    return {s["id"]: s for s in data["sections"]}


def test_report_simulates_a_bundled_trace_like_simulate(tmp_path: Path) -> None:
    # Before: every --dataset other than random failed with "--random-input-len applies only
    # to --dataset random", a flag the user never gave (--prompt was always passed as it).
    out = tmp_path / "r.html"
    r = run_cli("report", M, "--dataset", "sharegpt", "--num-prompts", "20",
                "--request-rate", "4", "-o", str(out))
    assert r.code == 0, r.err
    sim = _sections(out)["simulate"]["answer"]
    cli = json.loads(run_cli("simulate", M, "--dataset", "sharegpt", "--num-prompts", "20",
                             "--request-rate", "4", "--json").out)
    assert sim["dataset"] == "sharegpt" and sim["completed"] == 20
    for key in ("total_input_tokens", "total_output_tokens", "median_ttft_ms", "p99_ttft_ms"):
        assert sim[key] == cli[key], key


def test_report_request_rate_without_a_simulation_is_refused(tmp_path: Path) -> None:
    # Before: --request-rate 4 with neither --num-prompts nor --dataset wrote a report with
    # no simulation at all and said nothing: the flag was dropped.
    out = tmp_path / "r.html"
    r = run_cli("report", M, "--request-rate", "4", "-o", str(out))
    assert_one_line_error(r)
    assert "--num-prompts" in r.err
    assert not out.exists()


def test_report_request_is_chunked_by_the_gpus_default_budget(tmp_path: Path) -> None:
    # A100-40GB: vLLM's default --max-num-batched-tokens is 2048 (under 70 GiB), the figure the
    # capacity section prints. A 5000-token prompt is prefilled in ceil(5000 / 2048) = 3 chunks
    # (2048 + 2048 + 904), as `kvplan request --chunk 2048` says. Before: 1 step, chunk None.
    out = tmp_path / "r.html"
    r = run_cli("report", M, "--gpu", "A100-40GB-SXM", "--prompt", "5000", "--output", "100",
                "--batch", "1", "-o", str(out))
    assert r.code == 0, r.err
    s = _sections(out)
    assert s["capacity"]["answer"]["max_num_batched_tokens"] == 2048
    req = s["request"]["answer"]
    assert (req["chunk_tokens"], req["prefill_steps"]) == (2048, 3)
    cli = json.loads(run_cli("request", M, "--prompt", "5000", "--output", "100",
                             "--chunk", "2048", "--json").out)
    assert req == cli
