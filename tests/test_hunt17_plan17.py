"""Hunt 17 (planner): kvplan plan's answers that vLLM would not run as printed, and words."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

SMALL = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
         "--max-num-batched-tokens", "2048", "--dataset", "random", "--num-prompts", "100",
         "--request-rate", "4", "--slo", "ttft:p99:1500", "tpot:p99:50")


# -------------------- D1: a what-if weight format won silently
# meta-llama/Llama-3.1-8B's config.json has no quantization_config. vLLM 0.11's
# get_quant_config builds GPTQ from the checkpoint's own quantize_config.json and refuses
# without one ("Cannot find the config file for gptq"), so `vllm serve meta-llama/Llama-3.1-8B
# --quantization gptq` does not start. `kvplan capacity` prices the flag as a what-if with a
# note; `kvplan plan -q none,gptq` made the gptq candidate the winner (one L40S either way,
# $1.09/h, the 4-bit weights leave more KV: the larger margin breaks the tie) and printed
# that serve line with no word that it cannot start.
def test_a_what_if_weight_format_winner_says_so() -> None:
    res = run_cli(*SMALL, "-q", "none,gptq", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert "--quantization gptq" in doc["summary"]["vllm_serve"]
    said = [w for w in doc["warnings"] if "--quantization gptq" in w]
    assert len(said) == 1, doc["warnings"]
    assert "vLLM cannot serve it from this checkpoint" in said[0]
    text = run_cli(*SMALL, "-q", "gptq")
    assert text.code == 0, text.err
    assert "what-if" in " ".join(text.out.split())


def test_fp8_weights_are_quantized_online_so_no_note() -> None:
    # fp8 quantizes 16-bit weights as they load (Fp8Config needs no file): vLLM serves it
    res = run_cli(*SMALL, "-q", "fp8", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    assert "--quantization fp8" in doc["summary"]["vllm_serve"]
    assert not [w for w in doc["warnings"] if "what-if" in w]


# -------------------- D2: traffic longer than the model's context blamed --max-model-len
# meta-llama/Llama-3.1-8B's config.json: max_position_embeddings 131072 (its llama3
# rope_scaling is not one vLLM scales the length by). 20 random prompts of 140,000 + 128
# tokens need 140,128 tokens each. Without --max-model-len the refusal read "--max-model-len
# 131072 is below the longest request in the traffic (140128 tokens); raise it or trim the
# traffic": a flag the user never gave, and advice vLLM refuses (a --max-model-len above
# 131072 is every candidate's `invalid`, exit 1). It now names the model's context.
LONG = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1", "--dataset", "random",
        "--num-prompts", "20", "--random-input-len", "140000", "--request-rate", "5",
        "--slo", "ttft:p99:2000", "--max-num-batched-tokens", "2048")


def test_traffic_past_the_models_context_names_the_context() -> None:
    for extra in ((), ("--max-model-len", "150000"), ("--max-model-len", "100000")):
        res = run_cli(*LONG, *extra)
        assert_one_line_error(res)
        assert "context of 131072 tokens" in res.err, res.err
        assert "(140128 tokens)" in res.err
        assert "raise it" not in res.err


def test_a_short_max_model_len_is_still_named() -> None:
    res = run_cli(*SMALL, "--max-model-len", "1000")  # 1024 + 128 = 1152 > 1000
    assert_one_line_error(res)
    assert res.err.startswith("error: --max-model-len 1000 is below the longest request in "
                              "the traffic (1152 tokens)"), res.err


# -------------------- D3: the twice-the-TP lever vanished where the model refuses it
# Qwen/Qwen2.5-7B-Instruct has 28 attention heads; vLLM 0.11's
# ModelConfig.verify_with_parallel_config requires num_attention_heads % tp == 0, so a TP4
# winner's "twice the TP" (TP8) cannot be served. The lever table dropped the row with no
# word (kv, chunk and prefix rows only), where every other variant that cannot be built
# (no fit, wider than a node) is a row with its reason.
def test_a_refused_tp_lever_says_why() -> None:
    res = run_cli("plan", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S", "-tp", "4",
                  "--max-num-batched-tokens", "2048", "--dataset", "random", "--num-prompts",
                  "100", "--request-rate", "4", "--slo", "ttft:p99:2000", "--json")
    assert res.code == 0, res.err
    rows = {x["change"]: x for x in res.json()["levers"]}
    tp8 = rows["--tensor-parallel-size 8"]
    assert not tp8["verified"] and tp8["replicas"] is None
    assert "num_attention_heads 28" in tp8["note"], tp8["note"]


# -------------------- D4: a miss under 1 % read "margin -0 %"
# Llama-3.1-8B on H100 TP1, the first 400 mooncake-conversation requests, prefix-affinity,
# ttft:p99:10000 tpot:p99:200: 8 replicas pass; with 7 the p99 TTFT is 10,031.6 ms, margin
# (10000 - 10031.6) / 10000 = -0.32 %, and the line read "With 7 replicas: misses the SLO
# (p99_ttft_ms margin -0 %)" (the refusals' "misses ... by 0 %" likewise).
def test_pct_text_keeps_a_small_miss_visible() -> None:
    from kvplan.units import pct_text

    assert pct_text(100 * (10000 - 10031.600894515082) / 10000) == "-0.32"
    assert pct_text(0.0) == "0"
    assert pct_text(-122.4) == "-122"
    assert pct_text(5.25) == "5"  # a miss of 1 % or more keeps its whole-percent words


def test_the_one_fewer_line_shows_a_small_miss() -> None:
    args = ("plan", "meta-llama/Llama-3.1-8B", "--dataset", "mooncake-conversation",
            "--num-prompts", "400", "--gpu", "H100", "-tp", "1", "--max-num-batched-tokens",
            "2048", "--slo", "ttft:p99:10000", "tpot:p99:200", "--router", "prefix-affinity")
    doc = run_cli(*args, "--json")
    assert doc.code == 0, doc.err
    d = doc.json()
    best = next(c for c in d["candidates"] if c["id"] == d["summary"]["best"])
    fewer = best["fleet_one_fewer"]
    key, m = min(fewer["margins"].items(), key=lambda kv: kv[1])
    assert -0.01 < m < 0  # the case this guards: a miss that rounds to 0 %
    text = " ".join(run_cli(*args).out.split())
    assert f"With {fewer['replicas']} replicas: misses the SLO ({key} margin {100 * m:.2g} %)" \
        in text


# -------------------- D5: a fleet over three instance shapes was priced too high
# A --prices file with 8x $30, 2x $8 (2-GPU nodes) and 1x $4.50 of one GPU: 11 TP1 replicas
# rent as cheaply as one 8x + one 2x + one 1x = 30 + 8 + 4.50 = $42.50/h (11 GPUs, none
# idle). fleet_cost mixed one bulk shape with one other and answered 8x + three 1x = 30 +
# 3 x 4.50 = $43.50/h (docs/planner.md: "the cheapest shape ... or, where cheaper, k whole
# instances of a shape holding several replicas and the other ... on another shape").
THREE_SHAPES = """gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,\
source_url,observed_on,transcribed_by
H100-SXM-80GB,lam,8x,8,8,30,https://example.com,2026-11-01,hand
H100-SXM-80GB,lam,2x,2,2,8,https://example.com,2026-11-01,hand
H100-SXM-80GB,lam,1x,1,1,4.5,https://example.com,2026-11-01,hand
"""


def test_a_fleet_mixes_every_shape_it_pays_to() -> None:
    from kvplan.costs.pricing import fleet_cost
    from kvplan.specs.prices import read_rows

    rows = read_rows(THREE_SHAPES, "test")
    c = fleet_cost(rows, 11, 1)
    assert c is not None
    assert c.usd_per_hour == 42.5
    assert (c.row.instance, c.instances) == ("8x", 1)
    assert [(r.instance, n) for r, n in c.also] == [("2x", 1), ("1x", 1)]
    assert (c.gpus_rented, c.idle_gpus) == (11, 0)
    # one shape where it is the cheapest: 8 on one 8x ($30), 16 on two ($60)
    assert [fleet_cost(rows, n, 1).usd_per_hour for n in (8, 16)] == [30, 60]  # type: ignore[union-attr]
    # TP2: the 1x cannot hold a replica (1-GPU nodes); 3 on three 2x = $24 < one 8x = $30;
    # 5 on one 8x (4 replicas) + one 2x = $38, below five 2x ($40) or two 8x ($60)
    tp2 = [fleet_cost(rows, n, 2) for n in (3, 5)]
    assert [c.usd_per_hour for c in tp2 if c] == [24, 38]
