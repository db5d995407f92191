"""hunt17 (gpu17): the GPU catalog against datasheets, and GPUs described in files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli

L8B = "meta-llama/Llama-3.1-8B"


def test_a_gpu_file_named_like_a_catalog_gpu_is_refused(tmp_path: Path) -> None:
    # A file GPU with the catalog's id was priced from that GPU's measured kernel tables and
    # CUDA total, not the file's figures: at mem_bw_tbps 1.0 Llama-3.1-8B's decode step reads
    # its 16.06e9 B of bf16 weights in no less than 16.06e9 / 1.0e12 = 16.06 ms, yet TPOT came
    # out 7.16 ms (H100's tables, 2.2 TB/s: above the file's own peak), and a 40 GB file GPU
    # had H100's 79.18 GiB CUDA total (40 GB reads as ~39.58 GiB).
    f = tmp_path / "gpu.yaml"
    f.write_text("id: H100-SXM-80GB\nmemory_gb: 40\nmem_bw_tbps: 1.0\nbf16_tflops_dense: 300\n")
    for args in (("latency", L8B, "--prompt", "512", "--output", "64"), ("capacity", L8B)):
        r = run_cli(*args, "--gpu", str(f))
        assert_one_line_error(r)
        assert "field 'id'" in r.err and "H100-SXM-80GB" in r.err
    # an alias is a catalog name too ('h100' -> H100-SXM-80GB)
    f.write_text("id: h100\nmemory_gb: 40\nmem_bw_tbps: 1.0\nbf16_tflops_dense: 300\n")
    assert_one_line_error(run_cli("capacity", L8B, "--gpu", str(f)))
    # its own name prices the file's figures: decode at <= 1.0 TB/s, 16.06 ms or more
    f.write_text("id: my-h100\nmemory_gb: 40\nmem_bw_tbps: 1.0\nbf16_tflops_dense: 300\n")
    r = run_cli("latency", L8B, "--prompt", "512", "--output", "64", "--gpu", str(f), "--json")
    assert r.code == 0, r.err
    assert r.json()["tpot_s"] >= 16.06e-3


PLAN = ("plan", "meta-llama/Llama-3.2-1B", "--request-rate", "2", "--num-prompts", "60",
        "--random-input-len", "128", "--random-output-len", "16", "--slo", "ttft:p99:2000",
        "-tp", "1")


def test_a_file_gpu_without_a_price_is_told_a_price_flag_that_works(tmp_path: Path) -> None:
    # `plan --gpu my.yaml` without a price said "give --price my-h100=USD_PER_GPU_HOUR", and
    # that flag was refused ("unknown GPU 'my-h100'"): --price reads the GPU as --gpu does,
    # by catalog name or by the file, so the advice names the file
    f = tmp_path / "my.yaml"
    f.write_text("id: my-h100\nmemory_gb: 40\nmem_bw_tbps: 1.0\nbf16_tflops_dense: 300\n")
    r = run_cli(*PLAN, "--gpu", str(f))
    assert_one_line_error(r)
    assert f"--price {f}=USD_PER_GPU_HOUR" in r.err
    assert run_cli(*PLAN, "--gpu", str(f), "--price", f"{f}=2").code == 0
    # a catalog GPU keeps its id in the advice
    r = run_cli(*PLAN, "--gpu", "MI300X")
    assert_one_line_error(r)
    assert "--price MI300X=USD_PER_GPU_HOUR" in r.err


def test_gpus_names_the_gpu_whose_rates_a_table_less_gpu_stands_on() -> None:
    # `kvplan latency --gpu L4` says "roofline: L4 has no measured kernel tables; ... the
    # rates of L40S's measured kernels"; `kvplan gpus` said only "none (roofline)"
    r = run_cli("gpus", "--json")
    assert r.code == 0, r.err
    rows = {g["id"]: (g["kernel_tables"], g["roofline_rates_of"]) for g in r.json()["gpus"]}
    assert rows["L4"] == (None, "L40S") and rows["MI300X"] == (None, "H200-SXM-141GB")
    assert rows["A100-40GB-SXM"] == (None, "A100-80GB-SXM")
    assert rows["H800-SXM-80GB"] == ("H100-SXM-80GB", None)  # its twin's tables, no roofline
    text = run_cli("gpus")
    assert "none (roofline): L40S's" in text.out
    lat = run_cli("latency", "meta-llama/Llama-3.2-1B", "--gpu", "L4", "--prompt", "64",
                  "--output", "2")
    assert "the rates of L40S's measured" in " ".join(lat.out.split())


def test_an_unknown_gpu_is_told_the_nearest_catalog_names() -> None:
    # "H20" (a GPU kvplan does not list) listed all sixteen ids with none singled out; the
    # model lookup names the nearest ids, and so does the GPU lookup now
    r = run_cli("capacity", "meta-llama/Llama-3.2-1B", "--gpu", "H20")
    assert_one_line_error(r)
    assert "unknown GPU 'H20' (nearest: H200-SXM-141GB)" in r.err
    r = run_cli("capacity", "meta-llama/Llama-3.2-1B", "--gpu", "l40")
    assert "(nearest: L40S, L4)" in r.err
    # the name ROCm's torch prints for an MI300X is the MI300X (as 'NVIDIA H100 80GB HBM3'
    # is the H100 SXM)
    r = run_cli("capacity", "meta-llama/Llama-3.2-1B", "--gpu", "AMD Instinct MI300X", "--json")
    assert r.code == 0, r.err
    assert r.json()["gpu"] == "MI300X"


def test_a_tp_group_past_a_node_on_a_table_less_gpu_is_not_called_data_parallel() -> None:
    # Llama-3.1-405B (dense) at TP16 on MI300X (8 GPUs a node, no kernel tables): refused
    # with "data / expert parallel steps are priced from measured kernel tables" though
    # neither DP nor EP was asked; the TP group wider than a node is what needs them
    r = run_cli("latency", "meta-llama/Llama-3.1-405B", "--gpu", "MI300X", "--prompt", "512",
                "--output", "8", "-tp", "16")
    assert_one_line_error(r)
    assert "data / expert parallel" not in r.err
    assert "tensor-parallel group wider than one node (16 GPUs, 8 per MI300X node)" in r.err
    # an MoE under DP keeps its words
    r = run_cli("latency", "Qwen/Qwen3-30B-A3B", "--gpu", "MI300X", "--prompt", "512",
                "--output", "8", "-dp", "2")
    assert_one_line_error(r)
    assert r.err.startswith("error: data / expert parallel steps are priced")


def test_gb200_cuda_total_is_what_torch_reports_on_a_gb200() -> None:
    from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
    from kvplan.specs.hardware import load_gpu

    # PyTorch on GB200 trays: "GPU 0 has a total capacity of 184.31 GiB" (vLLM DeepSeek-V4
    # decode on GB200, EP 8; vLLM DP4 cudagraph-capture OOM "on the 184 GiB GB200"; three
    # more GB200 OOM reports, all 184.31). kvplan derived 184.57 GiB from nvidia-smi's
    # 189,471 MiB less H100's 467 MiB reserve: B200's reserve is 183,359 MiB - 178.35 GiB =
    # 729 MiB, and GB200's is 189,471 - 188,733 = 738 MiB. At 0.9 the 0.26 GiB over put
    # 0.23 GiB of KV cache vLLM does not have.
    assert round(cuda_total_bytes(load_gpu("GB200")) / 2**30, 2) == 184.31


def test_a_price_override_keeps_the_gpus_own_node() -> None:
    from kvplan.specs.prices import price_table

    # GB200's node is its NVL72 NVLink domain (node_gpus 72; CoreWeave's row: gpus_per_node
    # 72). `--price GB200=10` made a row of 8 GPUs a node, so a TP16 replica was "not held by
    # any instance" with the override, yet planned with CoreWeave's row
    rows = price_table(overrides=("GB200=10",)).for_gpu("GB200")
    assert [(r.gpus_per_instance, r.gpus_per_node) for r in rows] == [(1, 72)]
    assert price_table(overrides=("H100=2",)).for_gpu("H100-SXM-80GB")[0].gpus_per_node == 8
    r = run_cli("plan", "meta-llama/Llama-3.2-1B", "--request-rate", "2", "--num-prompts", "60",
                "--random-input-len", "128", "--random-output-len", "16", "--slo",
                "ttft:p99:2000", "-tp", "16", "--gpu", "GB200", "--price", "GB200=10", "--json")
    assert r.code == 0, r.err
    summary = r.json()["summary"]  # 16 GPUs at the override's $10: $160 an hour
    assert (summary["status"], summary["gpus"], summary["usd_per_hour"]) == ("feasible", 16, 160)


H20 = ("id: my-h20\narch: Hopper (GH100)\nmemory_gb: 96\nmem_bw_tbps: 4.0\n"
       "bf16_tflops_dense: 148\nfp16_tflops_dense: 148\nfp8_tflops_dense: 296\n"
       "int8_tops_dense: 296\ninterconnect_gbps: 900\nnode_gpus: 8\n")


def test_a_gpu_h200_beats_on_every_figure_is_never_priced_faster_than_h200(
        tmp_path: Path) -> None:
    # An H20 described in a file (NVIDIA H20: Hopper, 148 TFLOP/s bf16 / 296 fp8 dense,
    # 4.0 TB/s, NVLink 900 GB/s): H200 beats it on every figure (989.4 / 1,978.9, 4.8 TB/s,
    # 900), yet its roofline borrowed H100's rates (the nearest datasheet) and was floored
    # only at its donor, which does not beat it (3.35 TB/s): Llama-3.1-8B, batch 1, 128 in,
    # TPOT 5.486 ms against H200's measured 5.853
    f = tmp_path / "h20.yaml"
    f.write_text(H20)
    args = ("latency", L8B, "--prompt", "128", "--output", "64", "--json")
    mine, h200 = run_cli(*args, "--gpu", str(f)), run_cli(*args, "--gpu", "H200")
    assert mine.code == 0 and h200.code == 0, (mine.err, h200.err)
    assert mine.json()["tpot_s"] >= h200.json()["tpot_s"]
    assert mine.json()["ttft_s"] >= h200.json()["ttft_s"]
    text = " ".join(run_cli(*args[:-1], "--gpu", str(f)).out.split())
    assert "never priced faster than H200-SXM-141GB's measured step" in text


def test_fp8_marlin_moe_on_a100_never_streams_above_its_bandwidth() -> None:
    import numpy as np

    from kvplan.costs import kernels as K
    from kvplan.costs.kernels import work
    from kvplan.costs.kernels.tables import peaks

    # A100 has no fp8 tensor cores: fp8 experts run Marlin MoE, priced as its bf16 MoE x the
    # roofline ratio of 1-byte over 2-byte weights, whose activation bytes (4 x hidden a
    # token) are fewer than the routed tokens' (2 x (2 x hidden + inter) x topk): where the
    # bf16 MoE sits at its bandwidth floor the fp8 time dipped under the bytes it moves,
    # 1.002x A100's 2.039 TB/s (hidden 5120, inter 1536, 160 experts, top-6, TP4)
    tokens = np.exp(np.random.default_rng(6).uniform(0, np.log(40000), 300)).round()
    for hidden, inter, experts, topk, tp in ((5120, 1536, 160, 6, 4), (2048, 768, 128, 8, 1)):
        t = K.moe("A100-80GB-SXM", tokens, hidden=hidden, inter=inter, num_experts=experts,
                  topk=topk, dtype="fp8", tp=tp).seconds
        moved = work.moe_bytes(tokens, hidden, inter, topk, experts, tp, 1, "fp8")
        assert np.all(moved / t <= peaks("A100-80GB-SXM")["mem_bw"] * (1 + 1e-9))
