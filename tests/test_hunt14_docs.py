"""Hunt 14, docs: figures and help texts for what changed on 2026-12-07 (PP batches in flight,
CUDA-graph sizes, fp8_ds_mla, vLLM bench's own arrival stream), checked against the command
that prints them today."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """The document's text with line breaks folded to spaces (quotes may wrap)."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def _help(*cmd: str) -> str:
    r = run_cli(*cmd, "--help")
    assert r.code == 0, r.err
    return " ".join(r.out.split())


PP_BURST = ("simulate", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--num-prompts", "400",
            "--random-input-len", "1024", "--random-output-len", "256", "--json")
PP_ROWS = [
    # (layout flags, the row docs/simulator.md quotes; its figures are the run's
    # output_throughput tok/s, mean TTFT in s and mean TPOT in ms, rounded as quoted)
    (("-tp", "4"), "| TP4 | 1,884.73 tok/s, TTFT 14.09 s, TPOT 138.1 ms | unchanged |"),
    (("-tp", "2", "-pp", "2"), "| 2,056.58 tok/s, TTFT 12.55 s, TPOT 120.5 ms |"),
    (("-pp", "4"), "| 1,769.61 tok/s, TTFT 11.87 s, TPOT 132.1 ms |"),
]


def test_simulator_pp_table_is_what_simulate_prints_today() -> None:
    """Before: docs/simulator.md's batch-queue table said TP4 1,920.94 tok/s, TTFT 13.68 s,
    TPOT 135.8 ms; TP2 PP2 2,080.87 tok/s; PP4 1,771.32 tok/s. Since vLLM 0.11.0's CUDA-graph
    sizes (89027fd: decode batches of 257..512 pad to a multiple of 8, not 16) simulate
    prints 1,922.05 / 2,080.20 / 1,770.56 tok/s and TPOT 135.67 ms at TP4; TP4's mean TTFT
    is 13,674.5 ms, i.e. 13.67 s (13.68 was mis-rounded)."""
    doc = _doc("docs/simulator.md")
    for flags, row in PP_ROWS:
        assert row in doc, row
        r = run_cli(*PP_BURST, *flags)
        assert r.code == 0, r.err
        d = r.json()
        got = (f"{d['output_throughput']:,.2f} tok/s, TTFT {d['mean_ttft_ms'] / 1e3:.2f} s, "
               f"TPOT {d['mean_tpot_ms']:.1f} ms")
        assert got in row, (flags, got)
    assert "709 at PP4 against 1,918 at TP4; now 2,057 and 1,770 against 1,885)" in doc


def test_kv_cache_dtype_help_names_fp8_ds_mla() -> None:
    """Before: every command's --kv-cache-dtype help (and README's list) stopped at nvfp4,
    though b826d7f made fp8_ds_mla (vLLM 0.11's CacheDType) a value DeepSeek-V3.2 takes."""
    for cmd in ("capacity", "latency", "simulate", "report", "calibrate"):
        assert "nvfp4; fp8_ds_mla (DeepSeek-V3.2 only)." in _help(cmd), cmd
    assert "`fp8_ds_mla` only for DeepSeek-V3.2" in _doc("README.md")
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8",
                "--kv-cache-dtype", "fp8_ds_mla")
    assert r.code == 2 and "DeepSeek-V3.2's sparse-MLA cache format" in r.err


def test_seed_help_says_what_it_seeds() -> None:
    """Before: simulate's and plan's --seed had no help text ('[default: 0]' only), though
    since c039dfd it seeds the lengths and vLLM bench serve's own arrival stream and takes
    0 .. 2**32 - 1 (2**32 is refused)."""
    assert ("--seed <int> 0 .. 2**32 - 1: random lengths and arrival times, as vllm bench "
            "serve --seed draws them.") in _help("simulate")
    assert "--seed <int> 0 .. 2**32 - 1: drawn lengths and arrivals" in _help("plan")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "5",
                "--request-rate", "2", "--seed", str(2**32))
    assert r.code == 2 and "[0, 4,294,967,295]" in r.err


def test_workloads_doc_names_the_arrival_stream() -> None:
    """Before: docs/workloads.md's *Drawn once* said the lengths and then the arrival times
    came from numpy's generator seeded by --seed; since c039dfd the arrivals come from
    numpy's legacy stream (np.random.RandomState(seed)), as vllm bench serve draws them."""
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    doc = _doc("docs/workloads.md")
    assert "arrival times from its legacy stream seeded by `--seed`" in doc
    assert "then arrival times, from numpy's generator" not in doc
    # vLLM's send times at --request-rate 2, 5 prompts, seed 0 (commit c039dfd): the
    # legacy stream's gammas, rescaled so the last is at 5 / 2 = 2.5 s.
    w = build_workload(WorkloadArgs(num_prompts=5, request_rate=2.0, seed=0))
    assert [round(float(t), 4) for t in w.arrival_s] == [0.4613, 1.1892, 1.7243, 2.1806, 2.5]


PP2_STAGES = [
    # (model, parameters a stage the doc quotes, max positions: rope cache x 128 x 2 B)
    ("mistralai/Mixtral-8x7B-v0.1", 46_964_940_800, 32_768),
    ("Qwen/Qwen3-30B-A3B", 31_154_454_528, 40_960),
]


def test_pp2_stage_bytes_say_parameters_and_name_capacitys_figure() -> None:
    """Before: docs/formulas-capacity.md said Mixtral-8x7B PP 2 holds 46,964,940,800 B 'a
    stage' and Qwen3-30B-A3B 'loads 31,154,454,528 B', but `capacity -pp 2` prints
    weights_bytes 46,973,329,408 and 31,164,940,288: the parameters plus vLLM's rope cache
    (cos/sin, max positions x head dim 128 x 2 B = 8 MiB and 10 MiB). The doc now says
    parameters and quotes capacity's figure too."""
    doc = _doc("docs/formulas-capacity.md")
    assert "Mixtral-8x7B PP 2: 46,964,940,800 B of parameters a stage" in doc
    assert "Qwen3-30B-A3B PP 2 loads 31,154,454,528 B of parameters on each stage" in doc
    for model, params, positions in PP2_STAGES:
        r = run_cli("capacity", model, "--gpu", "H100", "-pp", "2", "--json")
        assert r.code == 0, r.err
        weights = r.json()["weights_bytes"]
        assert weights == params + positions * 128 * 2
        assert f"{weights:,}" in doc, model


def test_calibrate_doc_says_rated_runs_replay_vllms_seed_0_send_times() -> None:
    """Before: docs/formulas-latency.md said a rated run is replayed with Poisson/gamma
    arrivals because 'the exact send times are not in the file'; since 18c0a88 calibrate
    draws them as `vllm bench serve --seed 0` does (numpy's legacy stream), so a run at
    vLLM's default seed is replayed at its very send times (5 prompts at 2 req/s: 0.4613,
    1.1892, 1.7243, 2.1806, 2.5 s; tests/test_calibrate_arrivals.py)."""
    import numpy as np

    from kvplan.analysis.calibration.serving_fit import run_workload
    from kvplan.analysis.calibration.serving_runs import ServingRun
    from kvplan.specs.requests.generators import vllm_arrival_rng
    from kvplan.specs.requests.workload import gamma_arrivals
    from kvplan.specs.serving import EngineConfig

    doc = _doc("docs/formulas-latency.md")
    assert "the exact send times are not in the file)" not in doc
    assert ("drawn as `vllm bench serve` draws them at its default `--seed 0`, numpy's legacy "
            "stream") in doc
    run = ServingRun(id="r", where="f", model="meta-llama/Llama-3.1-8B", gpu="H100",
                     engine=EngineConfig(), num_prompts=5, input_lens=(100,) * 5,
                     output_lens=(10,) * 5, request_rate=2.0, burstiness=1.0,
                     max_concurrency=None, measured={})
    assert np.array_equal(run_workload(run).arrival_s,
                          gamma_arrivals(5, 2.0, 1.0, vllm_arrival_rng(0)))


def test_roofline_formulas_carry_fp32_hidden_states_under_float32() -> None:
    """Before: docs/formulas-latency.md's roofline wrote the activations, the TP all-reduce
    and the PP hop at 2 B a hidden value, but since 24e4fde --dtype float32 carries 4 B:
    Llama-3.1-8B (hidden 4,096, 32 layers) on an L40S at PP2 hops 2 x 4,096 x 4 = 32,768 B a
    token (16,384 at bf16), all-reduces 16,384 B (8,192) and a stage of 16 layers moves
    2 x 4,096 x 4 x 16 = 524,288 B of activations a token (262,144)."""
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    doc = _doc("docs/formulas-latency.md")
    assert "2 x hidden x a B per token per layer" in doc
    assert "a = 2, 4 under --dtype float32" in doc
    assert "x T x hidden x 2 B" not in doc
    m, gpu = load_model("meta-llama/Llama-3.1-8B"), load_gpu("L40S")
    for dtype, a in (("auto", 2), ("float32", 4)):
        t = StepCostModel(m, gpu, EngineConfig(dtype=dtype, pipeline_parallel_size=2))
        assert t._co.p2p_s * t._link == 2 * 4096 * a
        assert t.constants.allreduce_bytes_per_token == 4096 * a
        assert t.constants.activation_bytes_per_token == 2 * 4096 * a * 16


def test_metrics_doc_places_the_rejected_row_where_simulate_prints_it() -> None:
    """Before: docs/metrics.md said the table has vLLM's summary rows, 'then kvplan's
    "Failed (rejected)" and KV rows', but simulate prints "Failed (rejected)" second, right
    under "Successful requests", and its own rows after the latencies."""
    doc = _doc("docs/metrics.md")
    assert ("kvplan's \"Failed (rejected)\" right after the successful requests, the latencies, "
            "then kvplan's preemption, prefix-cache, KV and engine-step rows.") in doc
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "5",
                "--random-input-len", "100", "--random-output-len", "10",
                "--max-concurrency", "2", "--request-rate", "2")
    assert r.code == 0, r.err
    rows = [line.split("│")[1].strip() for line in r.out.splitlines() if line.count("│") == 3]
    order = ["Successful requests", "Failed (rejected)", "Maximum request concurrency",
             "Request rate configured (RPS)", "Total input tokens", "Total generated tokens",
             "Peak concurrent requests", "P99 E2EL", "Preemptions", "Prefix cache hit rate",
             "Peak KV blocks", "Engine steps"]
    assert [rows.index(name) for name in order] == sorted(rows.index(name) for name in order)
