"""hunt13: the GPU catalog and prices against datasheets, torch's totals and vLLM."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

L1B = "meta-llama/Llama-3.2-1B"
GIB = 2**30


def test_kv_cache_memory_is_bounded_by_the_cuda_total_not_the_datasheet_gb() -> None:
    # H100 SXM: CUDA reports 79.18 GiB (what `kvplan gpus` and the capacity table print);
    # the datasheet's 80 GB is 74.51 GiB. 76 GiB of KV + 2.32 GiB of Llama-3.2-1B weights fits
    # in 79.18 GiB, and vLLM allocates it; kvplan refused it ("exceeds ... 74.51 GiB").
    r = run_cli("capacity", L1B, "--gpu", "H100", "--kv-cache-memory", "76GiB", "--json")
    assert r.code == 0, r.err
    assert r.json()["available_kv_bytes"] == 76 * GIB
    # the bound is the CUDA total: 80 GiB > 79.18 GiB is refused, naming 79.18 GiB
    bad = run_cli("capacity", L1B, "--gpu", "H100", "--kv-cache-memory", "80GiB")
    assert_one_line_error(bad)
    assert "exceeds H100-SXM-80GB's 79.18 GiB" in bad.err


def _ring_s(gpu: str, tp: int) -> float:
    from kvplan.costs.step.profiles import Profile
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    model = StepCostModel(load_model("meta-llama/Llama-3.1-70B"), load_gpu(gpu),
                          EngineConfig(tensor_parallel_size=tp), Profile(comm_eff=1.0))
    return model._co.ring_s


def test_a_tp_group_wider_than_an_nvlink_bridge_all_reduces_over_pcie() -> None:
    from kvplan.specs.hardware import load_gpu

    # H100 PCIe: a 2-way NVLink bridge (600 GB/s) joins a pair; TP4 / TP8 all-reduce over
    # PCIe Gen5 x16 (128 GB/s bidirectional, the datasheet). kvplan priced every TP at 600.
    pcie = load_gpu("H100-PCIe-80GB")
    assert [pcie.tp_link_bytes_per_s(tp) for tp in (1, 2, 4, 8)] == [600e9, 600e9, 128e9,
                                                                        128e9]
    assert load_gpu("RTX-3090").tp_link_bytes_per_s(4) == 64e9  # PCIe Gen4 x16
    assert load_gpu("H100").tp_link_bytes_per_s(8) == 900e9  # NVSwitch joins all 8
    # Llama-3.1-70B (hidden 8192, bf16): ring all-reduce of one token = 2 (tp-1)/tp x 16,384 B
    # over one direction of the link: TP2 2 x 1/2 x 16,384 / 300e9 = 54.61 ns;
    # TP4 2 x 3/4 x 16,384 / 64e9 = 384.0 ns (was 81.92 ns at 300 GB/s)
    assert abs(_ring_s("H100-PCIe-80GB", 2) - 16_384 / 300e9) < 1e-15
    assert abs(_ring_s("H100-PCIe-80GB", 4) - 1.5 * 16_384 / 64e9) < 1e-15


def test_a_tp_group_in_a_switchless_mesh_reaches_its_peers_over_tp_minus_1_links() -> None:
    from kvplan.specs.hardware import load_gpu

    # MI300X: 7 Infinity Fabric links of 128 GB/s (bidirectional) join 8 GPUs directly, no
    # switch (896 GB/s is their sum). A TP2 pair shares one link: 128 GB/s, not 896.
    mi = load_gpu("MI300X")
    assert [mi.tp_link_bytes_per_s(tp) for tp in (2, 4, 8)] == [128e9, 384e9, 896e9]
    # Llama-3.1-70B TP2 ring all-reduce, one token: 2 x 1/2 x 16,384 B / 64 GB/s = 256 ns
    # (was 16,384 / 448e9 = 36.57 ns, 7x too fast); TP8 keeps 448 GB/s one way
    assert abs(_ring_s("MI300X", 2) - 16_384 / 64e9) < 1e-15
    assert abs(_ring_s("MI300X", 8) - 1.75 * 16_384 / 448e9) < 1e-15


def test_capacity_mode_fills_a_node_only_instance_with_replicas() -> None:
    from kvplan.costs.pricing import filled_cost
    from kvplan.specs.prices import price_table

    # AWS rents H100s only as the 8-GPU p5.48xlarge ($55.04/h): 8 TP1 replicas fill one,
    # $6.88 each. Capacity mode priced one TP1 replica at the whole $55.04/h (7 GPUs idle),
    # so $/M tokens came out 8x too high and TP8 won ($1.56/M tok against ~$0.32).
    rows = price_table("aws").for_gpu("H100-SXM-80GB")
    one = filled_cost(rows, 1)
    assert one is not None and (one.replicas, one.instances, one.usd_per_hour) == (8, 1, 55.04)
    three = filled_cost(rows, 3)  # floor(8 / 3) = 2 replicas, 2 GPUs idle
    assert three is not None and (three.replicas, three.idle_gpus) == (2, 2)
    capped = filled_cost(rows, 1, most=2)  # --max-gpus 2
    assert capped is not None and (capped.replicas, capped.usd_per_hour) == (2, 55.04)
    # Lambda: 8x H100 at $31.92 ($3.99 a replica) beats 1x at $4.29, unless
    # --max-cost-per-hour 10 rules the 8x unit out (the 1x row then, as before)
    lam = price_table("lambda").for_gpu("H100-SXM-80GB")
    assert (filled_cost(lam, 1) or one).usd_per_hour == 31.92
    assert (filled_cost(lam, 1, budget=10.0) or one).usd_per_hour == 4.29
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "-tp", "1,8",
                "--provider", "aws", "--num-prompts", "200", "--slo", "ttft:p99:2000",
                "tpot:p90:50", "--workers", "1", "--json")
    assert r.code == 0, r.err
    s = r.json()["summary"]
    assert "--tensor-parallel-size 1 " in s["vllm_serve"]
    assert (s["replicas"], s["gpus"], s["usd_per_hour"]) == (8, 8, 55.04)
    # 128 output tokens a request: $55.04 / (8 x rate x 128 x 3600) x 1e6
    want = 55.04 / (8 * s["capacity_rps_per_replica"] * 128 * 3600) * 1e6
    assert abs(s["usd_per_million_output_tokens"] - want) < 1e-9


_HEAD = "gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour," \
        "source_url,observed_on\n"


def test_price_file_row_errors_say_what_is_wrong(tmp_path) -> None:
    # an unknown GPU named only that, not the date / count hint meant for other fields
    bad = tmp_path / "gpu.csv"
    bad.write_text(_HEAD + "V100,me,x,8,8,20,u,2026-12-01\n")
    r = run_cli("prices", "--prices", str(bad))
    assert_one_line_error(r)
    assert "line 2: unknown GPU 'V100'" in r.err and "observed_on is" not in r.err
    # a row shorter than the header: the missing column, not "'NoneType' object has no
    # attribute 'strip'"
    short = tmp_path / "short.csv"
    short.write_text(_HEAD + "H100,me,x,8,8,20,u\n")
    r = run_cli("prices", "--prices", str(short))
    assert_one_line_error(r)
    assert "line 2: the row has no observed_on" in r.err and "NoneType" not in r.err


def test_a_price_observed_in_the_future_is_refused(tmp_path) -> None:
    # observed_on 2099-01-01 was accepted: its age is negative, so the 90-day staleness
    # warning could never fire for it
    f = tmp_path / "future.csv"
    f.write_text(_HEAD + "H100,me,x,8,8,20,u,2099-01-01\n")
    r = run_cli("prices", "--prices", str(f))
    assert_one_line_error(r)
    assert "observed_on 2099-01-01 is in the future" in r.err


def test_a_pipeline_hop_in_a_switchless_mesh_crosses_one_link() -> None:
    from kvplan.costs.step.profiles import Profile
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    # MI300X at TP1 PP2: stage 0 sends its hidden states and residual (2 x 8,192 x 2 B =
    # 32,768 B a token; hunt14: the residual was left out) to stage 1 over the one Infinity
    # Fabric link between them (64 GB/s one way), not all 7 (448)
    assert load_gpu("MI300X").tp_link_bytes_per_s(1) == 128e9
    m = StepCostModel(load_model("meta-llama/Llama-3.1-70B"), load_gpu("MI300X"),
                      EngineConfig(pipeline_parallel_size=2), Profile(comm_eff=1.0))
    assert abs(m._co.p2p_s - 32_768 / 64e9) < 1e-15  # was 16,384 / 448e9 = 36.57 ns


def test_gpus_names_the_kernel_tables_docs_send_users_to_it_for() -> None:
    # docs/parallelism.md: "DP / EP steps of MoE models need the measured kernel tables
    # (`kvplan gpus`; ...)" - but `kvplan gpus` did not say which GPUs have them
    r = run_cli("gpus", "--json")
    assert r.code == 0, r.err
    tables = {g["id"]: g["kernel_tables"] for g in r.json()["gpus"]}
    assert tables["H100-SXM-80GB"] == "H100-SXM-80GB"
    assert tables["H800-SXM-80GB"] == "H100-SXM-80GB"  # its kernels_of twin
    assert tables["MI300X"] is None and tables["H100-PCIe-80GB"] is None
    text = run_cli("gpus")
    assert "kernel tables" in text.out and "none (roofline)" in text.out
