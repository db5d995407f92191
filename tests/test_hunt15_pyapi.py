"""kvplan as a Python library in notebooks, and its pictures, against the CLI (hunt 15)."""

from __future__ import annotations

import json
import re

import kvplan
from tests.conftest import run_cli

M = "meta-llama/Llama-3.1-8B"


def test_serving_run_header_keeps_the_rate_it_was_drawn_at() -> None:
    # before: kvplan.simulate_serving(..., WorkloadArgs(request_rate=5, burstiness=0.5))
    # .header() said request_rate "trace" and burstiness 1.0 (the run forgot its arguments:
    # a random workload's arrivals > 0 read as a trace's), so the notebook's table dropped
    # `kvplan simulate`'s "Request rate configured (RPS) 5.00" row, and a saved header was
    # refused by `kvplan calibrate` ("request_rate 'trace'"). The CLI's --json says 5.0 / 0.5:
    # the values given.
    from kvplan.report.views.notebook import html

    args = kvplan.WorkloadArgs(num_prompts=20, request_rate=5.0, burstiness=0.5)
    run = kvplan.simulate_serving(M, "H100", workload=args)
    header = run.header()
    assert header["request_rate"] == 5.0 and header["burstiness"] == 0.5
    cli = json.loads(run_cli("simulate", M, "--num-prompts", "20", "--request-rate", "5",
                             "--burstiness", "0.5", "--json").out)
    assert {k: cli[k] for k in header} == header
    text = re.sub(r"<[^>]+>", "", html(run))
    assert re.search(r"Request rate configured \(RPS\)\s*│\s*5\.00", text)
    # a built Workload has no arguments: its header says what the arrivals show, as before
    built = kvplan.simulate_serving(M, "H100", workload=kvplan.build_workload(args))
    assert built.header()["request_rate"] == "trace"


def test_numpy_int32_arguments_do_not_wrap_byte_counts() -> None:
    # before: a notebook's numpy int32 (a pandas column, np.arange(..., dtype=np.int32)) went
    # into the arithmetic as it was: kvplan.batch_footprint(kv, np.int32(64),
    # np.int32(100000)).total_bytes was 1,342,177,280 (wrapped at 2**31, with only a
    # RuntimeWarning) where `kvplan batch --batch 64 --context 100000` says 838,860,800,000,
    # and the answers held np.int32 that json.dumps refuses. Llama-3.1-8B: 32 layers x 8 KV
    # heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes/token; x 100,000 tokens =
    # 13,107,200,000 per request; x 64 = 838,860,800,000.
    import dataclasses

    import numpy as np

    kv = kvplan.kv_spec(kvplan.load_model(M))
    fp = kvplan.batch_footprint(kv, np.int32(64), np.int32(100_000))
    cli = json.loads(run_cli("batch", M, "--batch", "64", "--context", "100000", "--json").out)
    assert fp.total_bytes == cli["total_bytes"] == 838_860_800_000
    assert type(fp.total_bytes) is int
    tl = kvplan.request_timeline(kv, np.int32(100_000), np.int32(5))
    assert tl.prefill_bytes == 13_107_200_000
    json.dumps(dataclasses.asdict(fp))
    json.dumps(dataclasses.asdict(tl))


def test_latency_result_holds_plain_floats() -> None:
    # before: kvplan.request_latency(...).ttft_s, .e2e_s and .output_throughput_tok_s were
    # np.float64 (the kernel tables' interpolation) while .tpot_s was a float, so a notebook
    # cell showed np.float64(0.9422...) and repr(lat) carried numpy's noise; the values are
    # the CLI's `kvplan latency --json` figures, now as Python floats.
    model, gpu = kvplan.load_model("meta-llama/Llama-2-70b-hf"), kvplan.load_gpu("H100")
    lat = kvplan.request_latency(model, gpu, kvplan.EngineConfig(tensor_parallel_size=4),
                                 kvplan.RequestShape(batch=8, prompt_tokens=2048,
                                                     output_tokens=128))
    for v in (lat.ttft_s, lat.tpot_s, lat.e2e_s, lat.output_throughput_tok_s):
        assert type(v) is float
    assert "np.float64" not in repr(lat)
    cli = json.loads(run_cli("latency", "meta-llama/Llama-2-70b-hf", "--gpu", "H100", "-tp", "4",
                             "--batch", "8", "--prompt", "2048", "--output", "128",
                             "--json").out)
    assert (lat.ttft_s, lat.tpot_s, lat.e2e_s, lat.output_throughput_tok_s) == (
        cli["ttft_s"], cli["tpot_s"], cli["e2e_s"], cli["output_throughput_tok_s"])
