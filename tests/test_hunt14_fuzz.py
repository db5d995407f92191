"""fuzz14: bad input to what changed on the hunt-14 day gives one error line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli


def _saved_plan() -> dict[str, object]:
    """The smallest document load_plan_json takes as a saved plan (schema + summary), with
    one candidate, one lever and one SLO-at-band-edge row as kvplan plan --json writes them."""
    return {"schema": "kvplan.plan/v1",
            "inputs": {"model": "m", "workload": "random", "slo": {"bounds": []}},
            "summary": {"status": "feasible", "best": "c0",
                        "slo_at_band_edge": [{"key": "p99_ttft_ms", "limit": 2000.0,
                                              "value": 250.0, "band": [160.0, 430.0],
                                              "met_at_edge": True, "band_basis": "x"}]},
            "candidates": [{"id": "c0", "gpu": "H100", "tensor_parallel_size": 1,
                            "stage": "verified", "cost": {"usd_per_hour": 1.0}}],
            "levers": [{"change": "none", "capacity_rps": 2.0}]}


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(inputs="x"), "inputs is not an object"),
    (lambda d: d.update(candidates="x"), "candidates is not a list of objects"),
    (lambda d: d.update(levers=["x"]), "levers is not a list of objects"),
    (lambda d: d["summary"].update(slo_at_band_edge=[3]), "slo_at_band_edge is not a list"),
    (lambda d: d["summary"].update(usd_per_hour=float("nan")), "NaN or Infinity"),
    (lambda d: d["summary"]["slo_at_band_edge"][0].update(band=5), "not what kvplan plan"),
    (lambda d: d["candidates"][0].update(cost="x"), "not what kvplan plan"),
    (lambda d: d["candidates"][0].update(data_parallel_size="2"), "not what kvplan plan"),
])
def test_report_plan_hand_edited_values_are_one_error_line(tmp_path: Path, edit, words) -> None:
    """report --plan read a hand-edited plan's parts without checking their kind: inputs "x"
    was AttributeError ('str' object has no attribute 'get'), a NaN number ValueError (Out of
    range float values are not JSON compliant) while the page was written, band 5 TypeError:
    tracebacks, exit 1. Now one 'error:' line naming the part, exit 2, and no page written."""
    plan = _saved_plan()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(plan))
    ok = run_cli("report", "--plan", str(good), "-o", str(tmp_path / "ok.html"))
    assert ok.code == 0, ok.err  # the untouched document renders
    edit(plan)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan))
    out = tmp_path / "bad.html"
    res = run_cli("report", "--plan", str(bad), "-o", str(out))
    assert_one_line_error(res)
    assert words in res.err and not out.exists()


def test_quantization_compressed_tensors_without_a_checkpoint_config_says_why() -> None:
    """-q compressed-tensors on a model whose config.json has no quantization_config was
    refused with a line that contradicted itself: "unknown --quantization 'compressed-tensors':
    kvplan prices fp8, awq, gptq, mxfp4, nvfp4 and compressed-tensors". vLLM reads the scheme
    from the checkpoint's own config (and cannot start without one); the line now says that."""
    res = run_cli("capacity", "meta-llama/Llama-3.1-8B", "-q", "compressed-tensors")
    assert_one_line_error(res)
    assert "unknown" not in res.err and "checkpoint's own quantization_config" in res.err


@pytest.mark.parametrize("value", ["{bad json", "[]", ""])
def test_pasted_kv_transfer_config_must_be_a_json_object(value: str) -> None:
    """A pasted 'vllm serve ... --kv-transfer-config VALUE' was taken as a KV connector (and
    vLLM's hybrid KV cache manager turned off: gemma-2-9b-it then caches every token in its
    sliding-window layers) whatever VALUE was, exit 0. vLLM 0.11 parses it as a JSON object
    (parse_dataclass) and argparse stops on bad JSON, a list or no value: now one line, exit 2."""
    res = run_cli("capacity", "--", "vllm", "serve", "google/gemma-2-9b-it",
                  "--kv-transfer-config", value)
    assert_one_line_error(res)
    assert "takes a JSON object" in res.err


def test_pasted_kv_transfer_config_json_object_still_taken() -> None:
    """The well-formed connector stays accepted (a warning, exit 0)."""
    res = run_cli("capacity", "--", "vllm", "serve", "google/gemma-2-9b-it",
                  "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')
    assert res.code == 0 and "--kv-transfer-config ignored" in res.err
