"""hunt14-disagg: regressions found in the disaggregated prefill/decode path."""

from __future__ import annotations

import json

import pytest

from kvplan.analysis.disagg.joint_levers import faster_link
from kvplan.specs.links import load_link
from tests.conftest import assert_one_line_error, run_cli

SIM = ("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--random-input-len",
       "1000", "--random-output-len", "10", "--num-prompts", "1", "--disagg", "1P1D")


@pytest.mark.parametrize(("gpus", "link"), [
    (("--gpu", "L40S"), "nvlink4"),          # no NVLink at all (PCIe Gen4 card)
    (("--gpu", "A100-80GB"), "nvlink4"),     # NVLink 3: 300 GB/s a direction, not 450
    (("--gpu", "B200"), "nvlink4"),          # NVLink 5: 900 GB/s a direction
    (("--gpu", "H100", "--decode-gpu", "L40S"), "pcie5-x16"),  # L40S is PCIe Gen4 x16
])
def test_a_node_link_the_gpus_do_not_have_is_refused(gpus: tuple[str, ...], link: str) -> None:
    """`--kv-link nvlink4` (450e9 B/s a GPU: the SXM H100/H200's NVLink 4) was accepted on
    any GPU, so an L40S fleet moved KV at 450 GB/s; pcie5-x16 (63e9 B/s) on a Gen4 card
    (31.5e9 at most). Now one line, exit 2, naming the links these GPUs have."""
    r = run_cli(*SIM, *gpus, "--kv-link", link)
    assert_one_line_error(r)
    assert f"--kv-link {link} does not join" in r.err
    assert "use one of ib-ndr" in r.err


def test_nvlink4_on_h100_keeps_its_figure() -> None:
    """Llama-3.1-8B, 1,000 prompt tokens: cdiv(1000, 16) = 63 pages x 16 tokens x 131,072 B
    = 132,120,576 B; / 450e9 B/s = 0.29360128 ms + 2 us latency = 0.29560128 ms."""
    r = run_cli(*SIM, "--gpu", "H100", "--kv-link", "nvlink4", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["kv_link_bytes"] == 132_120_576
    assert doc["mean_kv_transfer_ms"] == pytest.approx(0.29560128)


def test_faster_link_what_if_stays_on_links_the_gpus_have() -> None:
    """The planner's 'faster link' what-if: past ib-xdr (the fastest network link) it offered
    nvlink4 to any fleet of <= 8 GPUs, L40S included; now only to H100/H200 SXM fleets."""
    xdr = load_link("ib-xdr")
    assert faster_link(xdr, 2, ("L40S", "L40S")) is None
    assert faster_link(xdr, 2, ("H100-SXM-80GB", "H100-SXM-80GB")).id == "nvlink4"
    pcie = load_link("pcie5-x16")
    assert faster_link(pcie, 2, ("B200-SXM-180GB", "B200-SXM-180GB")).id == "ib-xdr"


@pytest.mark.parametrize(("args", "rate", "ms"), [
    # L40S (PCIe Gen4 x16, 64 GB/s both ways): 32e9 x 128/130 = 31,507,692,307.7 B/s a GPU;
    # TP2 <-> TP2: 132,120,576 B / (2 x 31.5077e9) = 2.09664 ms + 5 us (was 50e9: 1.32621)
    (("--gpu", "L40S", "-tp", "2"), 64e9 / 2 * 128 / 130, 2.10164),
    # ib-xdr (100e9) into an H100 (Gen5 x16: 63.0154e9): 132,120,576 / 63.0154e9 = 2.09664 ms
    # + 5 us (was 1.32621 ms at 100e9)
    (("--gpu", "H100", "--kv-link", "ib-xdr"), 128e9 / 2 * 128 / 130, 2.10164),
    # ib-ndr's 50e9 is below an H100's PCIe: unchanged, 132,120,576 / 50e9 + 5 us
    (("--gpu", "H100"), 50e9, 2.64741152),
])
def test_a_network_link_is_capped_by_the_gpus_pcie(args: tuple[str, ...], rate: float,
                                                    ms: float) -> None:
    """A NIC reaches GPU memory over the GPU's PCIe x16 (GPUDirect RDMA): no GPU moves KV
    faster than one direction of it. kvplan moved 50e9 B/s (InfiniBand NDR) into an L40S and
    100e9 (XDR) into an H100, above their PCIe links (31.5e9, 63.0e9)."""
    r = run_cli(*SIM, *args, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["kv_link_bytes"] == 132_120_576
    assert doc["kv_link_bytes_per_s_per_gpu"] == pytest.approx(rate)
    assert doc["mean_kv_transfer_ms"] == pytest.approx(ms)


def test_a100_fleets_have_their_own_nvlink() -> None:
    """A100's NVLink 3 (600 GB/s both ways, 300e9 a direction) had no catalog entry: the public
    A100 1P1D point (vLLM #26072) was simulated over nvlink4, which is now refused on A100.
    Llama-3.1-8B, 1,000 tokens = 132,120,576 B / 300e9 = 0.44040192 ms + 2 us."""
    r = run_cli(*SIM, "--gpu", "A100-80GB", "--kv-link", "nvlink3", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["mean_kv_transfer_ms"] == pytest.approx(0.44240192)


def test_public_a100_point_asks_a_link_kvplan_accepts() -> None:
    """benchmarks/compare_disagg_public.py asked `--kv-link nvlink4` of every served point,
    A100 included; it now asks the fastest in-node link of the point's GPU."""
    import benchmarks.compare_disagg_public as cdp

    p = next(x for x in cdp.load_points() if x["id"] == "vllm-26072-1p1d")
    argv = cdp.question(p).argv
    assert argv[argv.index("--kv-link") + 1] == "nvlink3"


def test_plan_says_why_an_nvlink4_space_on_l40s_has_no_fleet() -> None:
    """`kvplan plan --disagg --kv-link nvlink4` on L40S forms no fleet (L40S has no NVLink);
    the answer named only the TP and the 8-GPU rules, not the GPUs a node link joins."""
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
                "--num-prompts", "20", "--random-input-len", "200", "--random-output-len", "20",
                "--request-rate", "2", "--slo", "ttft:p99:3000", "--disagg", "--kv-link",
                "nvlink4", "--json")
    assert r.code == 0, r.err
    joint = json.loads(r.out)["joint"]
    assert not [c for c in joint["candidates"] if c["kind"] == "disaggregated"]
    assert joint["versus"].endswith("joins at most 8 GPUs in all, and only the GPUs that "
                                    "have it)")


@pytest.mark.parametrize("path", ["core", "python"])
def test_a_refused_request_takes_its_prefill_round_robin_turn(path: str) -> None:
    """vLLM's toy_proxy_server.py picks the next prefill client (itertools.cycle) before it
    sends the request, so a request the prefill server refuses (here 40 prompt tokens over a
    32-token max_model_len) still used p0's turn: r1 goes to p1, r2 to p0. kvplan skipped
    the refused request's turn (r1 on p0, r2 on p1).
    Trace set-up of tests/test_disagg_trace.py; 2P1D; arrivals 0, 0.5, 1.0."""
    from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
    from kvplan.sim.testing import workload
    from tests.core_helpers import python_loop
    from tests.test_disagg_trace import COST, LIMITS, SHAPE, TIMER

    w = workload([0.0, 0.5, 1.0], [40, 8, 8], [2, 2, 2])
    pre = PoolSim(instances=2, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS,
                  max_model_len=32)
    dec = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS,
                  max_model_len=32)
    if path == "python":
        with python_loop():
            r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    else:
        r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    assert list(r.client.rejected) == [0]
    assert r.transfers.prefill_instance.tolist()[1:] == [1, 0]
    # each alone on its instance: r1 [0.5, 3.5], r2 [1.0, 4.0] (1 + 0.25 x 8 s)
    assert r.transfers.prefill_end_s.tolist()[1:] == [3.5, 4.0]
