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



# ---------------- P2: an invalid candidate's JSON row names the combination vLLM refused
# It was written with the first GPU and vLLM's default flags: `-tp 1,3 --gpu H100,L40S`
# listed the L40S TP 3 candidate as "H100-SXM-80GB, tensor_parallel_size 1" beside the
# reason "--tensor-parallel-size 3 must divide num_attention_heads 32".


def test_plan_keeps_a_tp_degree_the_model_refuses_as_an_invalid_candidate() -> None:
    # Llama-3.1-8B's 32 heads do not split over 3 GPUs: a candidate vLLM refuses for this
    # model (docs/planner.md: stage `invalid`), while TP 1 of the same list is planned
    args = [a if a != "H100" else "H100,L40S" for a in PLAN]
    res = run_cli(*args, "-tp", "1,3", "--max-num-batched-tokens", "default")
    assert res.code == 0, res.err
    rows = [(c["gpu"], c["tensor_parallel_size"], c["stage"])
            for c in res.json()["candidates"]]
    assert rows == [("H100-SXM-80GB", 1, "simulated"), ("H100-SXM-80GB", 3, "invalid"),
                    ("L40S", 1, "verified"), ("L40S", 3, "invalid")]


# ---------------- C1: calibrate names each run of a CSV sweep by its line, not the file
# Every row of a serving CSV sweep was the point "sweep.csv", so the per-run error table
# (and JSON `points`) could not say which row a 30 % error belonged to; the static CSV
# reader names its rows `line-N`. Now each row is `sweep.csv:N` (N: its line in the file).
SWEEP = ("model,gpu,num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms,"
         "mean_tpot_ms,mean_itl_ms,output_throughput\n"
         f"{L8B},H100,100,512,64,1,63.27,7.160,7.160,124.4\n"
         f"{L8B},H100,100,512,64,8,86.46,8.366,8.366,805.3\n")


def test_calibrate_names_each_row_of_a_csv_sweep(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "sweep.csv"
    path.write_text(SWEEP)
    res = run_cli("calibrate", str(path), "--force", "--json")
    assert res.code == 0, res.err
    ids = [p["id"] for p in res.json()["points"]]
    assert ids == ["sweep.csv:2"] * 4 + ["sweep.csv:3"] * 4


# ------- P3: a budget that rules out every fleet meeting the SLO is said as such
# Llama-3.1-8B at 30 req/s (300 requests of 1,024 + 128 tokens), SLO p99 TTFT 1 s and
# p90 TPOT 40 ms, H100 or L40S at runpod-secure prices: 5 L40S ($1.09/h each, $5.45/h) or
# 2 H100 ($3.99/h each, $7.98/h) meet it; --max-cost-per-hour 5 rules them all out. The
# answer said "nothing in the space meets the SLO; the closest, c0013 ... misses p90_tpot_ms
# by 4 % (42 ms) with 7 replicas" (the one-fewer probe's figure, against a 7-replica fleet
# that met it) and advised an H100, dearer still; the table said "misses ..." likewise.


def test_plan_budget_ruling_out_met_fleets_names_the_cheapest() -> None:
    res = run_cli("plan", L8B, "--gpu", "H100,L40S", "--num-prompts", "300",
                  "--request-rate", "30", "--slo", "ttft:p99:1000", "tpot:p90:40",
                  "--max-cost-per-hour", "5", "--json")
    assert res.code == 1, res.err
    s = res.json()["summary"]
    assert s["why"] == ("every fleet that meets the SLO breaks the budget: the cheapest, "
                        "c0012 (L40S TP 1, 5 replicas), costs $5.45/h > --max-cost-per-hour 5.0; "
                        "raise --max-cost-per-hour")
    assert s["advice"] == ""
    assert all(x["stage"] != "infeasible" for x in s["closest"])
