"""Hunt 13, docs: every figure README.md and docs/*.md quote against the command that prints
it today. Each row names the document, the words it quotes and the command's answer; both
must hold, so a doc that drifts from the code (or code that drifts from the doc) fails."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """The document's text with line breaks folded to spaces (quotes may wrap)."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def test_plan_help_states_the_searched_expert_parallel_default() -> None:
    """Before: `kvplan plan --help` said EP defaults to "on exactly when DP > 1", but the
    space searches both on and off at DP > 1 (space.ep_values; docs/planner.md)."""
    from kvplan.analysis.plan.parallel.space import EP_WITH_DP, ep_values

    assert ep_values((EP_WITH_DP,), 2) == (True, False)
    assert ep_values((EP_WITH_DP,), 1) == (False,)
    r = run_cli("plan", "--help")
    assert r.code == 0, r.err
    assert "(default: both when DP > 1, off at DP 1)" in " ".join(r.out.split())
    assert "on exactly when" not in r.out
    assert "both on and off when dp > 1, off at dp 1" in _doc("docs/planner.md")


SAVE_SIZES = [
    # (document, the words it quotes, --save-detailed?, bytes the file has today)
    ("README.md", "Llama-3.1-8B: 146 KiB, 109 MiB with `--save-detailed`", False, 146 * 1024),
    ("README.md", "Llama-3.1-8B: 146 KiB, 109 MiB with `--save-detailed`", True, 109 * 2**20),
    ("docs/metrics.md", "is 146 KiB as a summary and 109 MiB detailed", False, 146 * 1024),
    ("docs/metrics.md", "is 146 KiB as a summary and 109 MiB detailed", True, 109 * 2**20),
]


def test_azure_conv_save_result_sizes_the_docs_quote(tmp_path: Path) -> None:
    """Before: both documents said 166,082 bytes and 114,335,395 detailed; the files are
    149,995 (146 KiB) and 114,484,759 (109 MiB) bytes. Quoted rounded, checked to 1 %."""
    sizes: dict[bool, int] = {}
    for detailed in (False, True):
        out = tmp_path / f"run{int(detailed)}.json"
        r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dataset",
                    "azure-conv", "--save-result", str(out), "--json",
                    *(("--save-detailed",) if detailed else ()))
        assert r.code == 0, r.err
        sizes[detailed] = out.stat().st_size
    for doc, quote, detailed, quoted in SAVE_SIZES:
        assert quote in _doc(doc), (doc, quote)
        assert abs(sizes[detailed] / quoted - 1) < 0.01, (doc, detailed, sizes[detailed])


DSV3_EP72 = ("latency", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "-dp", "72",
             "--enable-expert-parallel", "--all2all-backend", "deepep_low_latency", "--prompt",
             "2000", "--output", "32", "--batch", "18432", "--max-num-batched-tokens", "16384")

DSV3_1P1D = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--disagg",
             "1P1D", "-dp", "2", "--num-prompts", "50")
DSV3_ROW = "| DP2 / DP2, experts TP-sharded over 16 GPUs | 1,583 ms | 23.7 ms | 1,190 |"
DSV3_EP_ROW = "| DP2 EP / DP2 EP | 1,688 ms | 27.8 ms | 1,057 | same |"
DSV3_TP_EP_ROW = "| TP8 EP / DP2 EP | 1,383 ms | 28.1 ms | 1,143 | same |"
EP = ("--enable-expert-parallel",)
TP_EP = (*EP, "--prefill-dp", "1", "--decode-dp", "2")
QWEN_2000 = ("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--dataset", "azure-conv",
             "--num-prompts", "2000")
QWEN_TEXT = ("1P1D TP1 / TP1 median TPOT 30.2 ms (compiled fleet, 0.26 CPU-s for the whole "
             "command); 1P1D TP1 / DP2 EP 19.5 ms (Python fleet, 2.2 CPU-s); 1P1D DP2 EP / "
             "DP2 EP 19.5 ms (2.4 CPU-s); aggregated DP2 EP 21.8 ms")
DISAGG = "docs/disaggregation.md"
CLOSED = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-concurrency", "25",
          "--num-prompts", "500", "--random-input-len", "4000", "--random-output-len", "128",
          "--random-range-ratio")
OSS_120B = ("capacity", "openai/gpt-oss-120b", "--gpu", "H100", "--block-size", "128",
            "--max-model-len", "16000", "--gpu-memory-utilization", "0.95")
CLOSED_TEXT = "mean TTFT 753 ms with ratio 0 against 251 ms with ratio 0.5"

JSON_FIGURES = [
    # (document, the words it quotes, command, JSON key, the value quoted, relative tolerance)
    ("docs/parallelism.md", "gives TPOT 169.6 ms", DSV3_EP72, "tpot_s", 0.16961, 0.0005),
    ("docs/parallelism.md", "gives 137.4 ms against the 169.6 ms in series",
     (*DSV3_EP72, "--enable-dbo"), "tpot_s", 0.13743, 0.0005),
    (DISAGG, DSV3_ROW, DSV3_1P1D, "median_ttft_ms", 1583.3, 0.0005),
    (DISAGG, DSV3_ROW, DSV3_1P1D, "median_tpot_ms", 23.65, 0.002),
    (DISAGG, DSV3_ROW, DSV3_1P1D, "output_throughput", 1190.1, 0.0005),
    (DISAGG, DSV3_EP_ROW, (*DSV3_1P1D, *EP), "median_ttft_ms", 1687.8, 0.0005),
    (DISAGG, DSV3_EP_ROW, (*DSV3_1P1D, *EP), "median_tpot_ms", 27.75, 0.002),
    (DISAGG, DSV3_EP_ROW, (*DSV3_1P1D, *EP), "output_throughput", 1056.9, 0.0006),
    (DISAGG, DSV3_TP_EP_ROW, (*DSV3_1P1D, *TP_EP), "median_ttft_ms", 1382.9, 0.0005),
    (DISAGG, DSV3_TP_EP_ROW, (*DSV3_1P1D, *TP_EP), "median_tpot_ms", 28.1, 0.002),
    (DISAGG, DSV3_TP_EP_ROW, (*DSV3_1P1D, *TP_EP), "output_throughput", 1143.2, 0.0006),
    (DISAGG, QWEN_TEXT, (*QWEN_2000, "--disagg", "1P1D"), "median_tpot_ms", 30.2, 0.002),
    (DISAGG, QWEN_TEXT, (*QWEN_2000, "--disagg", "1P1D", "--decode-dp", "2", *EP),
     "median_tpot_ms", 19.5, 0.003),
    (DISAGG, QWEN_TEXT, (*QWEN_2000, "--disagg", "1P1D", "-dp", "2", *EP),
     "median_tpot_ms", 19.5, 0.003),
    (DISAGG, QWEN_TEXT, (*QWEN_2000, "-dp", "2", *EP), "median_tpot_ms", 21.8, 0.003),
    ("docs/formulas-capacity.md", "64.58 / 7.38 / 0.13 / **3.14** |", OSS_120B, "weights_bytes",
     64.58 * 2**30, 0.0001),
    ("docs/formulas-capacity.md", "64.58 / 7.38 / 0.13 / **3.14** |", OSS_120B,
     "available_kv_bytes", 3.14 * 2**30, 0.002),
    ("docs/formulas-capacity.md", "gemma-3-27b-it's weights on an H100 are 51.38 GiB",
     ("capacity", "google/gemma-3-27b-it", "--gpu", "H100", "--max-model-len", "4096"),
     "weights_bytes", 51.38 * 2**30,
     0.0001),
    ("docs/simulator.md", CLOSED_TEXT, (*CLOSED, "0"), "mean_ttft_ms", 753, 0.0007),
    ("docs/simulator.md", CLOSED_TEXT, (*CLOSED, "0.5"), "mean_ttft_ms", 251, 0.002),
]


def test_json_figures_the_docs_quote() -> None:
    """Before: docs/parallelism.md quoted TPOT 171.5 ms (11,941 tok/s per node) and, with
    --enable-dbo, 145.8 against 181.7 ms (a 24.7 % gain); today 168.4 ms (12,165 tok/s)
    and 132.4 against 168.4 ms (27.2 %). docs/disaggregation.md's DP / EP pools: DeepSeek-V3
    1P1D quoted median TPOT 28.5 / 31.6 / 30.5 ms (today 25.3 / 26.3 / 25.6), Qwen3-30B-A3B
    34.4 / 22.2 / 22.2 / 25.6 ms (today 30.2 / 19.5 / 19.5 / 21.7). docs/simulator.md's
    closed loop at concurrency 25: 203 vs 118 ms TTFT quoted, 753 vs 251 ms today.
    docs/formulas-capacity.md: gpt-oss-120b's KV at util 0.95 quoted 3.14 GiB, is 3.15;
    gemma-3-27b-it's text weights quoted 50.34 GiB (the 32 MiB rope cache), are 50.59 (51.38
    with the vision tower, hunt 15)."""
    answers: dict[tuple[str, ...], dict[str, float]] = {}
    for doc, quote, argv, key, quoted, rel in JSON_FIGURES:
        assert quote in _doc(doc), (doc, quote)
        if argv not in answers:
            r = run_cli(*argv, "--json")
            assert r.code == 0, r.err
            answers[argv] = r.json()
        got = float(answers[argv][key])
        assert abs(got / quoted - 1) <= rel, (doc, quote, got)


def test_simulator_md_step_worked_example() -> None:
    """Before: docs/simulator.md worked Llama-2-7B's 128 decodes over 60,000 tokens to
    17.4187 ms (gemm 2.7927 ms, weights 4.9559, no per-request terms); the bundled profile
    and measured tables give 30.4175 ms: weights[128] 5.1328 ms, mix 11.5604 ms, layer
    0.7449 ms, step overhead 0.9346 ms and 94.1 us per request."""
    import kvplan
    from kvplan.analysis.serving import pick_profile
    from kvplan.costs.step.roofline import StepCostModel

    model, gpu, engine = (kvplan.load_model("meta-llama/Llama-2-7b-hf"),
                          kvplan.load_gpu("H100"), kvplan.EngineConfig())
    timer = StepCostModel(model, gpu, engine, pick_profile(model, gpu, engine, None))
    step = float(timer.step_time_agg(128, 128, 60000, 60128, False))
    f = timer.aggregate_form(8192)
    assert f is not None
    doc = _doc("docs/simulator.md")
    assert f"the same {step!r} s `step_time_agg(128, 128, 60000, 60128, False)` gives" in doc
    mix = f.kv_per_context * 60000 + f.kv_write[128] + f.state_per_request * 128
    for words in (f"weights[128] {f.weights[128] * 1e3:.4f} ms)", f"= {mix * 1e3:.4f} ms",
                  f"layer {f.layer_s * 1e3:.4f}", f"= {step * 1e3:.4f} ms",
                  f"+ {f.request_s * 1e6:.1f} us x 128)"):
        assert words in doc, words


def test_marlin_backend_stores_gpt_oss_experts_in_marlins_layout_on_hopper() -> None:
    """vLLM 0.11 picks Marlin on Hopper under VLLM_MXFP4_USE_MARLIN=1 (get_mxfp4_backend),
    and Marlin pads the experts its own way (vLLM 0.10.1 on that path, H100: 65.97 GiB,
    vllm#23278). Before: --mxfp4-moe-backend marlin changed the kernels only, the weights
    stayed 64.57 GiB (Triton) and row 19's KV 3.23 GiB; after: 65.91 GiB and 1.88 GiB, the
    figures docs/formulas-capacity.md gives for the Marlin layout."""
    import kvplan
    from kvplan.costs.memory.plan import unchecked_plan

    model, h100 = kvplan.load_model("openai/gpt-oss-120b"), kvplan.load_gpu("H100")
    marlin = kvplan.EngineConfig(mxfp4_moe_backend="marlin")
    a100 = unchecked_plan(model, kvplan.load_gpu("A100-80GB"), kvplan.EngineConfig())
    on_h100 = unchecked_plan(model, h100, marlin)
    assert on_h100.budget.weights_bytes == a100.budget.weights_bytes
    assert round(on_h100.budget.weights_bytes / 2**30, 2) == 65.93  # hunt14: fp32 rope
    triton = unchecked_plan(model, h100, kvplan.EngineConfig())
    assert round(triton.budget.weights_bytes / 2**30, 2) == 64.58
    assert "Triton layout: 3.21; Marlin layout: 1.87" in _doc("docs/formulas-capacity.md")
    r = run_cli("capacity", "--gpu", "H100", "--", "VLLM_MXFP4_USE_MARLIN=1", "vllm", "serve",
                "openai/gpt-oss-120b", "--gpu-memory-utilization", "0.95",
                "--max-num-batched-tokens", "1024")
    assert r.code == 1 and "only 1.87 GiB is available" in r.err, r.err  # 1: does not fit


def test_gemma3_worked_example_block_count_follows_from_the_bytes_it_names() -> None:
    """Before: docs/formulas-capacity.md wrote "109.86 GiB // 128 KiB // 10 = 89,994", but
    109.86 GiB // 128 KiB // 10 is 89,997; 89,994 needs the 109.8566 GiB test_memory.py uses
    (vLLM's printed 109.86 is rounded)."""
    doc = _doc("docs/formulas-capacity.md")
    page, gib = 16 * 16 * 128 * 2 * 2, 2**30
    assert "109.8566 GiB // 128 KiB // 10 = **89,994** blocks" in doc
    assert int(109.8566 * gib) // page // 10 == 89_994
    assert "(109.86 GiB exactly gives 89,997," in doc
    assert int(109.86 * gib) // page // 10 == 89_997
    assert 89_994 // 7 * 16 == 89_997 // 7 * 16 == 205_696
    assert f"{89_994 / 1798:.2f}" == f"{89_997 / 1798:.2f}" == "50.05"
    r = run_cli("capacity", "google/gemma-3-27b-it", "--gpu", "H200", "--max-model-len", "4096",
                "--kv-cache-memory", "109.86GiB", "--json")
    assert r.code == 0, r.err
    assert (r.json()["num_blocks"], r.json()["kv_cache_tokens"]) == (89_997, 205_696)


def test_readme_states_capacitys_does_not_fit_exit_status() -> None:
    """Before: the README said only that bad input exits 2; `kvplan capacity` exits 1 when
    the configuration does not fit (cmd_capacity.DOES_NOT_FIT), latency and simulate 2."""
    readme = _doc("README.md")
    assert "exits 2 from `latency`, `simulate` and the others, but 1 from `kvplan capacity`" \
        in readme
    small = ("openai/gpt-oss-120b", "--gpu", "L4")
    cap = run_cli("capacity", *small, "--json")
    assert cap.code == 1 and cap.json()["fits"] is False
    for key in ("why", "needed_bytes", "largest_max_model_len", "fits_with"):
        assert key in cap.json() and f"`{key}`" in readme
    assert run_cli("latency", *small, "--prompt", "10", "--output", "2").code == 2
    assert run_cli("simulate", *small, "--num-prompts", "2").code == 2


def test_readme_simulate_keys_and_where_kv_usage_is(tmp_path: Path) -> None:
    """Before: the README's command table listed `kv_usage` among `kvplan simulate --json`'s
    keys; --json never prints it (report/json_views.simulate_json), the --save-result file
    does (analysis/metrics.save_result_json)."""
    readme = _doc("README.md")
    assert ("`peak_kv_blocks` (the `--save-result` file adds the `kv_usage` series)"
            in readme)
    out = tmp_path / "r.json"
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--num-prompts", "5", "--json",
                "--save-result", str(out))
    assert r.code == 0, r.err
    for key in ("preemptions", "prefix_cache_hit_rate", "peak_kv_blocks"):
        assert key in r.json()
    assert "kv_usage" not in r.json()
    import json

    assert set(json.loads(out.read_text())["kv_usage"]) == {
        "time_s", "used_blocks", "logical_bytes", "running", "waiting"}


STEP_TABLES = [
    # (the table's bold title in docs/formulas-latency.md, the latency command, the phase)
    ("meta-llama/Llama-3.1-8B on H100-SXM-80GB TP1, one prefill step: 4096 tokens",
     ("meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "4096", "--output", "2"),
     "prefill"),
    ("meta-llama/Llama-3.1-70B on H100-SXM-80GB TP8, one decode step: 64 tokens",
     ("meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "8", "--prompt", "2048", "--output",
      "2", "--batch", "64"), "decode"),
    ("deepseek-ai/DeepSeek-V3 on H200-SXM-141GB TP8, one decode step: 64 tokens",
     ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--prompt", "2048", "--output",
      "2", "--batch", "64"), "decode"),
]


def _doc_table(title: str) -> list[tuple[str, str]]:
    """(op, 'N.NNN ms') rows of the table under ``title`` in docs/formulas-latency.md."""
    text = (ROOT / "docs/formulas-latency.md").read_text(encoding="utf-8")
    block = text.split(title, 1)[1].split("\n\n", 2)[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()]
    return [(r[0], r[-1]) for r in rows[2:]]


def test_formulas_latency_worked_steps_are_the_explain_rows() -> None:
    """Before: the three worked steps' attention rows read 7.420 / 2.910 / 5.961 ms (kernels
    77.129 / 12.249 / 34.414 ms); `latency --explain --json` gives 7.662 / 2.727 / 3.105 ms
    (77.372 / 12.067 / 31.559 ms). Every row is compared."""
    for title, argv, phase in STEP_TABLES:
        r = run_cli("latency", *argv, "--explain", "--json")
        assert r.code == 0, r.err
        step = next(s for s in r.json()["step_ops"] if s["phase"] == phase)
        want = [(o["op"], f"{o['seconds'] * 1e3:.3f} ms") for o in step["ops"]]
        want.append(("kernels", f"{step['kernels_s'] * 1e3:.3f} ms"))
        assert _doc_table(title) == want, title


def test_silicon_md_bundle_sizes() -> None:
    """Before: docs/silicon.md said the bundle holds 3,333,058 bytes, the GPU files 586-657 K,
    A100's 88 K and the manifest 36 K; the files hold 3,394,614 bytes, 581-651 KiB, 89 KiB
    and 47 KiB."""
    folder = ROOT / "src/kvplan/data/silicon"
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    doc = _doc("docs/silicon.md")
    assert f"holds 3.2 MiB ({sum(sizes.values()):,} bytes; budget 20 MiB)" in doc
    big = [v for k, v in sizes.items() if k.endswith(".npz") and not k.startswith("A100")]
    assert f"| {round(min(big) / 1024)}–{round(max(big) / 1024)} KiB each |" in doc
    assert f"| `A100-80GB-SXM.npz` | {round(sizes['A100-80GB-SXM.npz'] / 1024)} KiB |" in doc
    assert f"| `manifest.json` | {round(sizes['manifest.json'] / 1024)} KiB |" in doc


PUBLIC_ROWS = [
    # (the start of the row in docs/disaggregation.md, point id, metric family)
    ("SGLang DeepSeek-V3 prefill, 4 x 8 H100, EP32, 1K", "lmsys-prefill-1k", "prefill"),
    ("same, 2K prompts", "lmsys-prefill-2k", "prefill"),
    ("same, 4K prompts (16,384", "lmsys-prefill-4k", "prefill"),
    ("same, 4K, simulated perfect EPLB", "lmsys-prefill-4k-perfect-eplb", "prefill"),
    ("DeepSeek's profile prefill", "deepseek-profile-prefill-4k", "prefill"),
    ("SGLang decode, 9 x 8 H100", "lmsys-decode-2k", "decode"),
    ("same, TBO ablation row", "lmsys-decode-tbo-256", "decode"),
    ("vLLM #26072 Llama-3.1-8B 1P1D", "vllm-26072-1p1d", "disagg ITL"),
    ("same: P50 TTFT (ms)", "vllm-26072-1p1d", "disagg TTFT"),
    ("same: output tok/s", "vllm-26072-1p1d", "disagg output tok/s"),
]


def _four_digits(x: float) -> str:
    """A value as the table prints it: four significant digits, thousands separated."""
    import math

    d = 3 - math.floor(math.log10(x))
    return f"{round(round(x, d)):,}" if d <= 0 else f"{x:.{d}f}"


def test_disaggregation_md_public_points_table() -> None:
    """Before: the table's kvplan column read 51,770 / 50,470 / 48,010 / 55,380 / 48,010 /
    15,460 / 15,460 and vLLM 1P1D 17.5 ms / 1,314 ms / 1,313 tok/s (the other fleets 74-420 %
    off); benchmarks/compare_disagg_public.py gives 51,970 / 50,650 / 48,170 / 55,590 /
    48,170 / 15,480 / 15,480 and 17.74 / 1,118 / 1,380 (78-419 %)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "compare_disagg_public", ROOT / "benchmarks" / "compare_disagg_public.py")
    assert spec is not None and spec.loader is not None
    cdp = importlib.util.module_from_spec(spec)
    sys.modules["compare_disagg_public"] = cdp
    spec.loader.exec_module(cdp)
    rows, _, _ = cdp.compare(cdp.load_points())
    text = (ROOT / "docs/disaggregation.md").read_text(encoding="utf-8")
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
             for line in text.splitlines() if line.startswith("| ")}
    for start, point, family in PUBLIC_ROWS:
        label = next(k for k in table if k.startswith(start))
        row = next(r for r in rows if r.point == point and family in r.family)
        assert table[label][1:] == [_four_digits(row.predicted), f"{row.error:.0%}"], label
    rest = [r.error for r in rows if r.point.startswith("vllm-") and r.point != "vllm-26072-1p1d"]
    label = next(k for k in table if k.startswith("2P1D, 3P1D, 1P2D, 2P2D"))
    assert table[label][2] == f"{min(rest):.0%}".rstrip("%") + f"-{max(rest):.0%}"


V3_PLAN = ("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--max-num-batched-tokens",
           "default", "--dataset", "random", "--num-prompts", "400", "--random-input-len", "256",
           "--random-output-len", "1024", "--request-rate", "30", "--sample-requests", "200",
           "--slo", "ttft:p99:5000", "--slo", "tpot:p99:150", "--json")


def test_planner_md_deepseek_v3_dp_example() -> None:
    """Before: docs/planner.md's DP / EP example said 626.94 GiB of weights, pools of 626,304
    (TP8) and 402,880 (DP8) tokens, p99 TPOT 71.1 (DP8 + EP) and 52.3 ms (winner); the plan
    gives 628.85 GiB (MLA's bf16 kv_b_proj copy), 622,656 and 373,760 tokens, 71.3 and
    52.0 ms."""
    doc = _doc("docs/planner.md")
    r = run_cli(*V3_PLAN)
    assert r.code == 0, r.err
    d = r.json()
    by_layout = {(c["tensor_parallel_size"], c["data_parallel_size"]): c for c in d["candidates"]}
    weights = by_layout[(1, 1)]["reason"].split("weights ")[1].split(" GiB")[0]
    tp8, dp8 = by_layout[(8, 1)]["kv_cache_tokens"], by_layout[(1, 8)]["kv_cache_tokens"]
    assert (f"DeepSeek-V3's {weights} GiB of weights need 8 H200s however they are split). TP8 "
            f"holds one MLA pool of {tp8:,} tokens per replica; DP8 holds 8 pools of {dp8:,}"
            ) in doc
    levers = {lv["change"]: lv for lv in d["levers"]}
    winner = f"| **{d['summary']['replicas']}** | **{d['summary']['usd_per_hour']:.2f}** | "
    assert f"{winner}{d['summary']['p99_tpot_ms']:.1f} |" in doc
    ep = levers["--enable-expert-parallel"]
    # the winner was TP1 DP8 (58.4 ms) until block fp8 was held to bf16's time (hunt 18)
    assert f"| TP2 DP4 + EP | {ep['replicas']} | {ep['usd_per_hour']:.2f} | " \
           f"{ep['binding_p99_ms']:.1f} |" in doc
    tp = levers["--data-parallel-size 1 --tensor-parallel-size 8"]
    assert f"({tp['binding_p99_ms']:.1f} as the lever below)" in doc
    alone = run_cli(*V3_PLAN, "-dp", "1")
    assert alone.code == 0, alone.err
    s = alone.json()["summary"]
    assert (f"| TP8 (the TP-only space's winner, `-dp 1`) | {s['replicas']} | "
            f"{s['usd_per_hour']:.2f} | {s['p99_tpot_ms']:.1f} (") in doc


def test_planner_md_dbo_lever_figures() -> None:
    """Before: docs/planner.md said the DeepSeek-V2-Lite DP2 + EP winner's p99 TPOT goes
    11.51 -> 12.06 ms with --enable-dbo (11.75 ms with the low-latency exchange alone); the
    same plan (tests/test_plan_dbo.py) gives 9.24 -> 10.01 ms (9.27 ms)."""
    from dataclasses import replace

    from kvplan.analysis.plan.fleet import replica, simulate_fleet
    from kvplan.analysis.plan.traffic import plan_traffic
    from tests.test_plan_dbo import DBO_LL, FAST, SLO, _plan, _work

    p = _plan(data_parallel_sizes=(2,), expert_parallel=(True,))
    assert p.winner is not None and p.winner.fleet is not None
    before = dict(p.winner.fleet.achieved)["p99_tpot_ms"]
    after = next(lv for lv in p.levers if lv.change == DBO_LL).binding_p99_ms
    assert after is not None
    d = p.winner.deployment.with_replicas(1)
    target = plan_traffic(_work(), sample=FAST["sample_requests"]).target
    assert target is not None
    ll = replace(d, engine=replace(d.engine, all2all_backend="deepep_low_latency"))
    alone = dict(simulate_fleet(replica(ll), target, 1, SLO).verdict.achieved)["p99_tpot_ms"]
    assert (f"{before:.2f} -> {after:.2f} ms. DBO does not pay here: the low-latency exchange "
            f"alone gives {alone:.2f} ms") in _doc("docs/planner.md")


def test_kv_cache_memory_bound_is_the_memory_cuda_reports() -> None:
    """Before: --kv-cache-memory was capped at memory_gb x 10^9 (H100: 74.51 GiB), below the
    79.18 GiB CUDA reports and vLLM can allocate, so `--kv-cache-memory 76GiB` for a 1B model
    (2.3 GiB of weights) was refused; the cap is now cuda_total_bytes."""
    m = "meta-llama/Llama-3.2-1B"
    ok = run_cli("capacity", m, "--gpu", "H100", "--kv-cache-memory", "76GiB", "--json")
    assert ok.code == 0, ok.err
    assert ok.json()["available_kv_bytes"] == 76 * 2**30
    over = run_cli("capacity", m, "--gpu", "H100", "--kv-cache-memory", "80GiB")
    assert over.code == 2 and "H100-SXM-80GB's 79.18 GiB of memory (CUDA total)" \
        in over.err, over.err
    assert "(`cuda_total_bytes`: H100 79.18 GiB, not `memory_gb`'s 74.51)" in _doc("README.md")


def test_readme_calibration_set_size() -> None:
    """Before: the README said the bundled profile is fitted on 139 points; the set it is
    fitted on (docs/formulas-latency.md's seventh refit) holds 141 points from 14 sources."""
    from kvplan.analysis.calibration.public_set import calibration_set

    cal = calibration_set()
    sources = len({p.source for p in cal.points})
    assert f"a public calibration set ({len(cal.points)} points, {sources} sources" in _doc(
        "README.md")
    latency_md = _doc("docs/formulas-latency.md")
    assert f"the public calibration set**: {len(cal.points)} points" in latency_md
    # and the points it skips (was "Twelve" / "12": the RTX 4090 point and two more)
    skipped = list(cal.skipped)
    kinds = [sum(k in s for s in skipped) for k in ("qwen3-32b", "rtx4090", "gpt-oss-120b")]
    assert (len(skipped), kinds) == (15, [9, 1, 5])
    assert ("Fifteen more points are in the file but skipped: kvplan's memory plan does not fit "
            "Qwen3-32B's default 40,960-token context on one GPU (9 points) nor Qwen3-8B's in "
            "bf16 on an RTX 4090 (1), nor gpt-oss-120b on one H100 at 0.9 in vLLM's mxfp4 "
            "layout (5;") in latency_md
    assert "kvplan cannot price 15 points, because its memory plan rejects them" in latency_md


def test_disaggregation_md_plans_table() -> None:
    """Before: docs/disaggregation.md's plans table gave the long-prompt 1P1D fleet p99 TPOT
    8.53 ms and the short-prompt H100 + L40S winner as 1 x L40S TP2; the plan gives 8.44 ms
    (tests/test_plan_disagg_cli.py's command) and 2 x L40S TP1 (tests/test_plan_joint.py)."""
    from tests.test_plan_joint import _joint

    doc = _doc(DISAGG)
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "300",
                "--random-input-len", "8000", "--random-output-len", "300", "--request-rate",
                "4", "--slo", "ttft:p99:3000", "--slo", "tpot:p99:9", "--disagg", "--json")
    assert r.code == 0, r.err
    best = r.json()["joint"]["best_disaggregated"]
    assert (f"H100 TP2 decode, $11.97/h, p99 TPOT {best['achieved']['p99_tpot_ms']:.2f} ms "
            "(arrivals drawn as `vllm bench serve` draws them, since 2026-12-07;") in doc
    win = _joint("short", "funnel")[0].winner
    assert win is not None and win.aggregated is not None
    d = win.aggregated.deployment
    assert (f"| the same, H100 + L40S | the same | {d.replicas} x {d.gpu.id} TP"
            f"{d.engine.tensor_parallel_size}, 2 x $1.09 = ${win.usd_per_hour:.2f}/h |") in doc


def test_formulas_latency_md_quotes_the_does_not_fit_line() -> None:
    """Before: docs/formulas-latency.md quoted "... needs 1.01 TiB of KV cache per GPU but
    A100-80GB-SXM has 58.25 GiB for it (7455 blocks) ..."; the line reads "..., but ... has
    58.32 GiB left for it (7465 blocks) after weights 12.55 GiB and activations 328.88 MiB"."""
    r = run_cli("latency", "meta-llama/Llama-2-7b-hf", "--gpu", "A100-80GB", "--prompt", "2000",
                "--output", "128", "--batch", "1000")
    assert r.code == 2
    quoted = r.err.split("the KV cache does not fit: ", 1)[1].split(" (lower --batch", 1)[0]
    assert f"Llama-2-7B's `{quoted}`" in _doc("docs/formulas-latency.md"), quoted


def test_planner_md_disagg_benchmark_winner() -> None:
    """Before: docs/planner.md called benchmarks/bench_plan_disagg.py's workload one where
    disaggregation wins (d1264, $20.74/h, against the aggregated $23.94/h); its space's
    aggregated winner is now one B200 TP2 replica at $13.58/h, below every fleet."""
    r = run_cli("plan", "meta-llama/Llama-3.1-70B", "--dataset", "azure-conv", "--gpu",
                "H100,H200,B200,A100-80GB,L40S", "-tp", "2,4,8", "--kv-cache-dtype", "auto,fp8",
                "--max-num-seqs", "64,128,256,512,default", "--max-num-batched-tokens",
                "default", "--slo", "ttft:p99:2000", "tpot:p99:100", "--json")
    assert r.code == 0, r.err
    s = r.json()["summary"]
    win = next(c for c in r.json()["candidates"] if c["id"] == s["best"])
    assert (win["gpu"], win["tensor_parallel_size"], s["replicas"]) == ("B200-SXM-180GB", 2, 1)
    assert (f"one B200 TP2 replica, {s['best']} at ${s['usd_per_hour']:.2f}/h, wins outright"
            in _doc("docs/planner.md"))
