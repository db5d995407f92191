"""Second hunt round (simulate, plan, report, calibrate): each defect pinned by a golden value."""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error, run_cli

L8B = "meta-llama/Llama-3.1-8B"
PLAN = ("plan", L8B, "--gpu", "H100", "--num-prompts", "40", "--request-rate", "2",
        "--random-input-len", "64", "--random-output-len", "8", "--slo", "ttft:p99:2000",
        "--json")

# ------------------- P1: plan refuses a flag value vLLM refuses whatever the model and GPU
# A TP degree of 0, a block of 7, a utilization of 1.5, an unknown KV dtype or router was
# recorded on every candidate as `invalid`, so the plan printed "nothing feasible: no
# configuration in the space fits in memory (...)" and exited 1 (an infeasible plan), and
# --max-model-len 0 was taken as "not given" (the plan ran and served --max-model-len 72).
# Bad input is one `error:` line naming the flag, exit 2, as in every other command.


@pytest.mark.parametrize(("flag", "value", "names"), [
    ("-tp", "0", "--tensor-parallel-size"),
    ("-pp", "0", "--pipeline-parallel-size"),
    ("--max-num-seqs", "0", "--max-num-seqs"),
    ("--max-num-batched-tokens", "0", "--max-num-batched-tokens"),
    ("--block-size", "7", "--block-size"),
    ("--gpu-memory-utilization", "1.5", "--gpu-memory-utilization"),
    ("--max-model-len", "0", "--max-model-len"),
    ("--kv-cache-dtype", "auto,foo", "--kv-cache-dtype"),
    ("--quantization", "foo", "--quantization"),
    ("--router", "foo", "--router"),
])
def test_plan_refuses_values_vllm_always_refuses(flag: str, value: str, names: str) -> None:
    res = run_cli(*PLAN, flag, value)
    assert_one_line_error(res)
    assert names in res.err

