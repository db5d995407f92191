"""Hunt 17 follow-ups (fu17): small defects other helpers found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.specs.hf_config import parse_config
from tests.conftest import assert_one_line_error, run_cli


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _llava_next_mistral(**text: Any) -> dict[str, Any]:
    """llava-hf/llava-v1.6-mistral-7b-hf-style wrapper whose text_config keeps only what differs
    from MistralConfig."""
    return {"architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next",
            "text_config": {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "intermediate_size": 14336, "max_position_embeddings": 32768,
                            "rope_theta": 1000000.0, "torch_dtype": "bfloat16",
                            "vocab_size": 32064, **text},
            "vision_config": {"hidden_size": 1024, "model_type": "clip_vision_model"}}


def test_compact_mistral_text_config_takes_mistralconfigs_4096_window(tmp_path: Path) -> None:
    # transformers MistralConfig.__init__: ``sliding_window: int | None = 4096``; a text_config
    # without the key is built with a 4,096-token window, and vLLM 0.11 reads
    # hf_text_config.sliding_window (ModelConfig.get_sliding_window) and gives every layer of
    # the (not interleaved) model that window. kvplan priced it as full attention.
    spec = parse_config(_llava_next_mistral(), name="m", file="m.json")
    assert spec.sliding_window == 4096
    assert set(spec.layer_kinds) == {"sliding"}
    out = run_cli("kv", _write(tmp_path, "m", _llava_next_mistral()), "--json").json()
    assert [g["kind"] for g in out["groups"]] == ["sliding"]
    # an explicit null stays full attention (MistralConfig keeps None: no window)
    spec = parse_config(_llava_next_mistral(sliding_window=None), name="m", file="m.json")
    assert spec.sliding_window is None and set(spec.layer_kinds) == {"full"}


def test_plan_says_a_tpot_bound_has_no_sample_for_one_token_outputs() -> None:
    # vLLM 0.11 benchmarks/serve.py calculate_metrics: a request's TPOT is taken only when
    # output_len > 1, and np.percentile(tpots or 0, 99) prints 0 when no request has one. With
    # --random-output-len 1 no request has a TPOT: plan printed "p99 TPOT 0.0 ms <= 30 ms,
    # band (10-90%) 0.0 ms - 0.0 ms: still met ...", a band around a placeholder.
    args = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1", "--num-prompts",
            "100", "--random-output-len", "1", "--request-rate", "10",
            "--slo", "ttft:p99:500 tpot:p99:30")
    result = run_cli(*args)
    assert result.code == 0, result.err
    line = next(x for x in result.out.splitlines() if x.strip().startswith("p99 TPOT"))
    assert "no sample" in line and "band (10-90%)" not in line, line
    out = run_cli(*args, "--json").json()
    check = next(c for c in out["summary"]["slo_at_band_edge"] if c["key"] == "p99_tpot_ms")
    assert check["sampled"] is False and check["band"] is None and check["met_at_edge"] is None
    assert out["summary"]["p99_tpot_ms_band"] is None
    ttft = next(c for c in out["summary"]["slo_at_band_edge"] if c["key"] == "p99_ttft_ms")
    assert ttft["sampled"] is True and ttft["band"] is not None


def test_plan_on_a_space_vllm_refuses_whole_is_bad_input() -> None:
    # vLLM 0.11 ModelConfig.verify_with_parallel_config: "Total number of attention heads (32)
    # must be divisible by tensor parallel size (3)". Every candidate of this space is refused
    # because of the user's own -tp, not the SLO: plan exited 1 ("nothing feasible", a table
    # with no rows); bad input is one error line and exit 2 (docs/planner.md, Exit status).
    args = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "3", "--dataset",
            "random", "--num-prompts", "50", "--request-rate", "5", "--slo", "ttft:p99:2000")
    for extra in ((), ("--json",)):
        result = run_cli(*args, *extra)
        assert_one_line_error(result)
        assert "vLLM refuses every configuration" in result.err
        assert "--tensor-parallel-size 3 must divide num_attention_heads 32" in result.err
        assert result.out == ""


def test_an_empty_trace_path_is_called_empty_not_a_folder() -> None:
    # --trace "$UNSET": the empty path became Path('') = '.', and the error read ".: cannot
    # read the trace (it is a folder, not a regular file)", naming a folder the user never gave
    for argv in (("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", ""),
                 ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "",
                  "--slo", "ttft:p99:500")):
        result = run_cli(*argv)
        assert_one_line_error(result)
        assert "--trace is empty" in result.err and "folder" not in result.err, result.err


def test_a_one_request_step_says_1_request() -> None:
    # latency --explain's step table and docs/formulas-latency.md's worked 8B prefill step
    # read "4096 tokens, 1 requests, 0 cached"
    out = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "4096",
                  "--output", "2", "--explain").out
    assert "one prefill step: 4096 tokens, 1 request, 0 cached" in out, out
    assert "1 requests" not in out
    doc = (Path(__file__).parent.parent / "docs" / "formulas-latency.md").read_text()
    assert "1 requests" not in doc
