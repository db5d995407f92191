"""Hunt 17 (lat17): `kvplan latency` defects.

Async scheduling's first step. vLLM 0.11 (``v1/engine/core.py`` ``step_with_batch_queue``)
overlaps the host's work for step n + 1 (schedule, prepare inputs) with the GPU's step n, so a
later step costs ``max(stage, host)``. A static batch starts on an idle engine: its first step
has no earlier step to hide its host work under (``scheduler.schedule()`` runs before the
executor starts, and the first tokens wait for ``update_from_output``), so it costs what it
costs synchronously. Until hunt 17 the first step was priced overlapped too: Llama-3.1-8B on
one H100, 64 prompts of 32 tokens, TTFT 36.42 ms with --async-scheduling against 43.38 ms
without, the whole host's 934.6 + 64 x 94.10 us = 6.957 ms (default.json engines.vllm)
hidden under nothing.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

VLLM_STEP_S, VLLM_REQUEST_S = 934.6e-6, 94.10e-6
"""default.json engines.vllm.step_overhead_s and request_overhead_s (the bundled profile)."""
BASE = ("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM-80GB", "--json")


def _pair(*args: str) -> tuple[dict[str, float], dict[str, float]]:
    sync, on = run_cli(*BASE, *args), run_cli(*BASE, *args, "--async-scheduling")
    assert sync.code == on.code == 0, (sync.err, on.err)
    return sync.json(), on.json()


def test_async_first_prefill_step_pays_its_host_work() -> None:
    # one prefill step of 64 x 32 tokens from an idle engine: nothing hides its host work
    sync, on = _pair("--prompt", "32", "--output", "2", "--batch", "64")
    assert on["ttft_s"] == pytest.approx(sync["ttft_s"], rel=1e-12)
    host = VLLM_STEP_S + 64 * VLLM_REQUEST_S  # 6.957 ms, under the ~36 ms prefill stage
    assert sync["ttft_s"] > 5 * host
    # the decode step after it overlaps as before: TPOT unchanged by the first step
    assert on["e2e_s"] - on["ttft_s"] == pytest.approx(on["tpot_s"], rel=1e-12)


def test_async_chunked_prefill_hides_only_the_later_chunks_host_work() -> None:
    # one 3,000-token prompt in chunks of 1,024: steps 1 and 2 run under their predecessors
    sync, on = _pair("--prompt", "3000", "--output", "11", "--max-num-batched-tokens", "1024")
    host = VLLM_STEP_S + 1 * VLLM_REQUEST_S  # 1.0287 ms a step, one request
    assert sync["ttft_s"] - on["ttft_s"] == pytest.approx(2 * host, rel=1e-9)
    assert sync["tpot_s"] - on["tpot_s"] == pytest.approx(host, rel=1e-9)


def test_async_explain_prices_the_first_prefill_step_as_ttft_does() -> None:
    # one prefill step: --explain's step time is the TTFT, async or not
    args = ("--prompt", "32", "--output", "2", "--batch", "64", "--explain")
    for extra in ((), ("--async-scheduling",)):
        r = run_cli(*BASE, *args, *extra)
        assert r.code == 0, r.err
        d = r.json()
        assert d["step_ops"][0]["phase"] == "prefill"
        assert d["step_ops"][0]["step_s"] == pytest.approx(d["ttft_s"], rel=1e-12)
        assert d["phases"]["prefill"]["seconds"]["total_s"] == pytest.approx(d["ttft_s"],
                                                                             rel=1e-12)


def test_kernel_note_names_an_all_reduce_table_of_another_engine_version() -> None:
    # L40S's custom all-reduce table is aiconfigurator's vLLM 0.22.0 run, every other L40S
    # table vLLM 0.24.0 (src/kvplan/data/silicon/manifest.json, tests/test_kernels_bundle.py);
    # the note said "vllm 0.24.0" for all of them, the all_reduce rows included
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "2",
                "--prompt", "100", "--output", "2", "--json")
    assert r.code == 0, r.err
    assert r.json()["kernels"].startswith(
        "kernels measured on L40S (vllm 0.24.0; its all-reduce vllm 0.22.0;")
    one = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "--prompt", "100",
                  "--output", "2", "--json")  # TP1 runs no all-reduce: no word of it
    assert one.json()["kernels"].startswith("kernels measured on L40S (vllm 0.24.0; aic")
    h100 = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM-80GB", "-tp", "2",
                   "--prompt", "100", "--output", "2", "--json")  # one version: as before
    assert h100.json()["kernels"].startswith("kernels measured on H100-SXM-80GB (vllm 0.24.0; aic")
