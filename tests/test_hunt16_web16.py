"""Hunt 16 (web16): what the page shows against what the CLI prints for the same question.

The browser tests share one server and one page; each loads a page, runs it once and reads the
cells (data-key, data-value) and their headings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from tests.conftest import run_cli
from tests.webtools import watched_page, web_server

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with web_server("--max-sim-requests", "2000", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def api(base: str, path: str, **params: Any) -> Any:
    with urlopen(f"{base}{path}?{urlencode(params)}", timeout=120) as r:
        return json.loads(r.read())


def settle(page: Any) -> None:
    page.wait_for_selector("body[data-state=done]", state="attached", timeout=60_000)


def cell_text(page: Any, key: str) -> str:
    return str(page.inner_text(f"td[data-key='{key}']"))


def heading(page: Any, key: str) -> str:
    """The row heading of a key-value table's cell."""
    return str(page.eval_on_selector(f"td[data-key='{key}']",
                                     "td => td.previousElementSibling.textContent"))


def test_the_request_page_rounds_a_halfway_byte_count_as_the_cli(base: str, page: Any) -> None:
    """33 prompt tokens of Llama-3.1-8B claim 33 x 131,072 B = 4,325,376 B = 4.125 MiB
    exactly; Python's '{:.2f}' (units.fmt_bytes, as vLLM's logs) rounds the tie to even,
    '4.12 MiB', where JS's toFixed gave '4.13 MiB'. The final cache, 41 tokens = 5.125 MiB,
    likewise '5.12 MiB'."""
    cli = run_cli("request", M, "--prompt", "33", "--output", "8")
    assert cli.code == 0, cli.err
    assert "prefill claims 4.12 MiB (4,325,376 bytes)" in cli.out
    assert "final cache 5.12 MiB (5,373,952 bytes" in cli.out
    page.goto(f"{base}/request?{urlencode({'prompt': 33, 'output': 8})}")
    settle(page)
    assert cell_text(page, "prefill_bytes") == "4.12 MiB"
    assert cell_text(page, "final_bytes") == "5.12 MiB"
    assert cell_text(page, "decode_bytes") == "1.00 MiB"


def test_the_request_page_rounds_a_halfway_share_as_the_cli(base: str, page: Any) -> None:
    """1 prompt token and 15 output tokens: prefill holds 1 of the 16 tokens, a share of
    0.0625 exactly; 6.25 % with one decimal is a tie that Python rounds to '6.2' (the CLI's
    'prefill share 6.2%'), where JS's toFixed gave '6.3 %'."""
    cli = run_cli("request", M, "--prompt", "1", "--output", "15")
    assert cli.code == 0, cli.err
    assert "prefill share 6.2%" in cli.out
    page.goto(f"{base}/request?{urlencode({'prompt': 1, 'output': 15})}")
    settle(page)
    assert json.loads(page.get_attribute("td[data-key='prefill_share']", "data-value")) == 0.0625
    assert cell_text(page, "prefill_share") == "6.2 %"


def run_plan(base: str, page: Any, **form: Any) -> dict[str, Any]:
    """The Plan page run on ``form`` (its other fields at their defaults); the API's answer."""
    page.goto(f"{base}/plan?{urlencode(form)}")
    page.click("#run")
    settle(page)
    return dict(json.loads(page.get_attribute("#plan", "data-json")))


PLAN = {"gpu": "H100-SXM-80GB", "tensor_parallel_size": "1", "num_prompts": 100,
        "slo": "ttft:p99:300 tpot:p99:15"}


def test_the_plan_card_calls_a_target_rates_share_a_load_not_a_capacity(
        base: str, page: Any) -> None:
    """With --request-rate the card's capacity_rps_per_replica is the target rate / replicas
    (analysis/plan/levers.load_per_replica): the load each replica serves, not what it could
    take; the page called it 'capacity per replica (req/s)'. The CLI heads it 'req/s per
    replica'; in capacity mode (no rate) it is one replica's searched capacity."""
    d = run_plan(base, page, **PLAN, request_rate=20)
    s = d["summary"]
    assert d["inputs"]["mode"] == "target" and s["replicas"] >= 2
    assert s["capacity_rps_per_replica"] == pytest.approx(d["inputs"]["target_rate_rps"]
                                                          / s["replicas"])
    label = heading(page, "summary.capacity_rps_per_replica")
    assert label == "load per replica (req/s: target rate / replicas)"
    head = page.eval_on_selector_all(
        "#plan table.grid", "ts => ts.map(t => t.caption.textContent + ' | ' + "
        "[...t.rows[0].cells].map(c => c.textContent).join(','))")
    levers = next(h for h in head if h.startswith("levers"))
    assert "load per replica (req/s: target rate / replicas),load per replica change %" in levers
    assert "capacity" not in levers

    d = run_plan(base, page, **PLAN)
    assert d["inputs"]["mode"] == "capacity" and d["inputs"]["target_rate_rps"] is None
    assert heading(page, "summary.capacity_rps_per_replica") == "capacity of one replica (req/s)"


def test_the_reports_lever_rows_call_a_target_rates_share_a_load() -> None:
    """`kvplan report --plan` wrote each lever row as 'capacity N req/s'; with a target rate
    N is that rate / the row's replicas (load_per_replica), so it reads 'load per replica'."""
    from kvplan.report.plan.plan_report import plan_sections

    for mode, rate, words in (("target", 20.0, "load per replica 10.00 req/s (0.0 %)"),
                              ("capacity", None, "capacity of one replica 10.00 req/s (0.0 %)")):
        plan = {"inputs": {"model": M, "workload": "random", "mode": mode,
                           "target_rate_rps": rate},
                "summary": {"status": "feasible", "best": "c1", "replicas": 2, "gpus": 2},
                "levers": [{"change": "none (the winner)", "capacity_rps": 10.0,
                            "delta_capacity_pct": 0.0, "usd_per_hour": 7.98}]}
        levers = next(s for s in plan_sections(plan) if s.id == "levers")
        assert levers.rows == (("none (the winner)", f"{words}, 7.98 $/h"),)


def names_on(client: Any, page_name: str) -> set[str]:
    """The form's field names (vLLM's flags, snake_case) on a page."""
    import re

    html = client.get(f"/{page_name}").text
    return set(re.findall(r'<(?:input|select)[^>]*\bname="([a-z_]+)"', html))


@pytest.fixture(scope="module")
def client() -> Any:
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=60)))


def test_each_page_asks_for_the_flag_its_refusal_names(client: Any) -> None:
    """A refusal names the flag that fixes it (the field the page puts the line beside); the
    pages had no such field: Qwen3-Next-80B on one H100 at TP 2 'fits with --quantization fp8'
    (weights 74.28 GiB > the requested 71.26 GiB), and Llama-3.1-70B's 131,072-token context
    does not fit the simulate page's L40S TP 4 ('the largest --max-model-len that fits'), yet
    neither the Capacity, Latency nor Simulate page offered --quantization, nor Simulate
    --max-model-len: a configuration the CLI runs that the page could not."""
    qwen = {"model": "Qwen/Qwen3-Next-80B-A3B-Thinking", "gpu": "H100",
            "tensor_parallel_size": 2}
    r = client.get("/api/capacity", params=qwen)
    assert r.status_code == 422 and r.json()["field"] == "quantization"
    for name in ("capacity", "latency", "simulate", "plan"):
        assert "quantization" in names_on(client, name), name
    fixed = client.get("/api/capacity", params={**qwen, "quantization": "fp8"})
    cli = run_cli("capacity", qwen["model"], "--gpu", "H100", "-tp", "2", "-q", "fp8", "--json")
    assert fixed.status_code == 200 and cli.code == 0
    assert fixed.json()["num_blocks"] == cli.json()["num_blocks"] > 0

    seventy = {"model": "meta-llama/Llama-3.1-70B", "gpu": "L40S", "tensor_parallel_size": 4,
               "num_prompts": 20, "request_rate": 2}
    r = client.get("/api/simulate", params=seventy)
    assert r.status_code == 422 and r.json()["field"] == "max_model_len"
    assert {"max_model_len", "gpu_memory_utilization"} <= names_on(client, "simulate")
    page = client.get("/api/simulate", params={**seventy, "max_model_len": "32K"})
    cli = run_cli("simulate", seventy["model"], "--gpu", "L40S", "-tp", "4", "--num-prompts",
                  "20", "--request-rate", "2", "--max-model-len", "32K", "--json")
    assert page.status_code == 200 and cli.code == 0
    assert page.json()["max_model_len"] == cli.json()["max_model_len"] == 32768
    assert page.json()["mean_ttft_ms"] == cli.json()["mean_ttft_ms"]


def test_the_simulate_page_shows_the_clis_band_and_throughput_rows(base: str, page: Any) -> None:
    """`kvplan simulate` prints under its table the calibration band ('band (10-90%, BASIS):
    TTFT a-b ms; TPOT ...; output throughput ...') and in it the total tokens, peak output rate,
    peak concurrency, total token throughput and the prefill / decode KV shares; the page
    showed none of them, though its answer carries each (the *_band keys, band_basis)."""
    form = {"num_prompts": 100, "request_rate": 10}
    page.goto(f"{base}/simulate?{urlencode(form)}")
    page.click("#run")
    settle(page)
    d = json.loads(page.get_attribute("#simulate", "data-json"))
    cli = run_cli("simulate", M, "--gpu", "H100", "--num-prompts", "100", "--request-rate", "10",
                  "--random-input-len", "1024", "--random-output-len", "128")
    assert cli.code == 0, cli.err
    band, out = " ".join(page.inner_text("#sim-band").split()), " ".join(cli.out.split())
    assert band.startswith(f"band (10-90%, {d['band_basis']}): TTFT ")
    assert band in out  # the CLI's line, word for word
    for key in ("mean_ttft_ms_band", "mean_tpot_ms_band", "output_throughput_band"):
        got = page.get_attribute(f"#sim-band [data-key={key}]", "data-value")
        assert json.loads(got) == d[key]
    # 100 requests x 1,024 prompt / 128 output tokens (random, range ratio 0)
    assert cell_text(page, "total_input_tokens") == "102,400"
    assert cell_text(page, "total_output_tokens") == "12,800"
    assert cell_text(page, "request_rate") == "10.00"
    for key, row in (("max_output_tokens_per_s", "Peak output token throughput (tok/s)"),
                     ("total_token_throughput", "Total token throughput (tok/s)")):
        assert f"{row} │ {d[key]:.2f}" in out and cell_text(page, key) == f"{d[key]:.2f}"
    shares = f"{100 * d['prefill_kv_share']:.0f} % / {100 * d['decode_kv_share']:.0f} %"
    assert f"KV claimed by prefill / decode │ {shares}" in out
    assert f"{cell_text(page, 'prefill_kv_share')} / {cell_text(page, 'decode_kv_share')}" == shares


def test_the_request_page_says_where_vllms_request_ends(base: str, page: Any) -> None:
    """`kvplan request` ends with vLLM's own end of the request (its prefill step samples the
    first output token, the last is never cached): 1,000 + 100 - 1 = 1,099 tokens x 131,072 B
    = 144,048,128 B = 137.38 MiB after 99 decode steps; the page showed only the 1,100-token
    final cache (137.50 MiB), dropping the line and the keys vllm_final_tokens / _bytes."""
    cli = run_cli("request", M, "--prompt", "1000", "--output", "100")
    assert cli.code == 0, cli.err
    page.goto(f"{base}/request?{urlencode({'prompt': 1000, 'output': 100})}")
    settle(page)
    line = " ".join(page.inner_text("#vllm-final").split())
    assert line == ("vLLM samples the first output token in the prefill step and never caches "
                    "the last: it ends at 1,099 tokens, 137.38 MiB (144,048,128 bytes), after "
                    "99 decode steps")
    assert line in " ".join(cli.out.split())
    assert page.get_attribute("#vllm-final [data-key=vllm_final_tokens]", "data-value") == "1099"
    assert cell_text(page, "final_bytes") == "137.50 MiB"


def test_the_simulate_page_names_a_dp_fleets_block_sum_as_a_sum(base: str, page: Any) -> None:
    """Qwen3-30B-A3B at DP 4 on H100: each rank's vLLM logs num_gpu_blocks 33,296; the answer's
    num_blocks is the four pools together, 133,184 = 4 x 33,296 (the CLI: '5540 / 133180
    usable', less one null block per rank). The page headed it 'KV blocks (vLLM
    num_gpu_blocks)', a figure no vLLM engine prints."""
    form = {"model": "Qwen/Qwen3-30B-A3B", "data_parallel_size": 4,
            "enable_expert_parallel": "on", "num_prompts": 100, "request_rate": 20}
    page.goto(f"{base}/simulate?{urlencode(form)}")
    page.click("#run")
    settle(page)
    d = json.loads(page.get_attribute("#simulate", "data-json"))
    per_rank = [r["num_gpu_blocks"] for r in d["dp_ranks"]]
    assert per_rank == [33296] * 4 and d["num_blocks"] == sum(per_rank) == 133184
    assert heading(page, "num_blocks") == ("KV blocks (all 4 DP ranks): the sum of each rank's "
                                           "vLLM num_gpu_blocks")
    heads = page.eval_on_selector_all("#simulate table.grid",
                                      "ts => ts.map(t => t.rows[0].textContent)")
    assert any("KV blocks (vLLM num_gpu_blocks)" in h for h in heads)  # the ranks' own


def test_the_plan_pages_candidates_differ_as_the_clis_configurations(
        base: str, page: Any) -> None:
    """The planner's candidates on one GPU and TP differ in --max-num-batched-tokens (the
    chunk: 512, 2048, 8192 by default) as well as --max-num-seqs; the CLI's configuration
    column says 'seqs 1024 chunk 2048' and 'seqs 1024 chunk 8192', while the page's table
    had no chunk column, so two candidates read as the same row."""
    d = run_plan(base, page, **PLAN, request_rate=20)
    chunks = {c["id"]: c["max_num_batched_tokens"] for c in d["candidates"]}
    rows = page.eval_on_selector_all(
        "#plan table.grid:has(caption:text-is('candidates (stage reached, and why it stopped "
        "there)')) tr", "rs => rs.slice(1).map(r => [...r.cells].slice(1).map(c => "
        "c.textContent).join('|'))")  # each row without its id
    verified = [r for r, c in zip(rows, d["candidates"], strict=True) if c["stage"] == "verified"]
    assert len(verified) >= 3 and len(set(verified)) == len(verified)  # no two alike
    for i, c in enumerate(d["candidates"]):
        got = page.get_attribute(f"td[data-key='candidates.{i}.max_num_batched_tokens']",
                                 "data-value")
        assert json.loads(got) == chunks[c["id"]]
    assert {512, 2048, 8192} <= set(chunks.values())


def test_the_plan_page_takes_the_price_its_refusal_asks_for(client: Any) -> None:
    """A GPU the provider does not price is refused with 'give --price GPU=USD_PER_GPU_HOUR
    or another --provider'; the Plan page offered neither field and its API refused --price
    as an unknown field (422), so such a GPU could not be planned from the page."""
    form = {"model": M, "slo": "ttft:p99:2000 tpot:p99:50", "gpu": "H100-SXM-80GB,L4",
            "tensor_parallel_size": "1", "num_prompts": 50, "provider": "lambda"}
    r = client.get("/api/plan", params=form)
    assert r.status_code == 422 and r.json()["field"] == "price"
    assert r.json()["detail"].startswith("no lambda price for L4; give --price L4=")
    assert {"price", "provider"} <= names_on(client, "plan")
    page = client.get("/api/plan", params={**form, "price": "L4=0.80"})
    cli = run_cli("plan", M, "--slo", form["slo"], "--gpu", form["gpu"], "-tp", "1",
                  "--num-prompts", "50", "--provider", "lambda", "--price", "L4=0.80", "--json")
    assert page.status_code == 200, page.text
    assert cli.code == 0, cli.err
    got, want = page.json(), cli.json()
    rows = [r for r in got["inputs"]["prices"]["rows"] if r["gpu"] == "L4"]
    assert rows and rows[0]["usd_per_gpu_hour"] == 0.80
    assert got["summary"]["best"] == want["summary"]["best"]
    assert got["summary"]["usd_per_hour"] == want["summary"]["usd_per_hour"]


def test_the_budget_bar_adds_up_to_the_gpu_also_with_a_given_kv_size(
        client: Any, base: str, page: Any) -> None:
    """The capacity chart's bar, on an axis 'GiB (CUDA total)', stacked weights + activation +
    non-torch + KV + (CUDA total - requested). With --kv-cache-memory 20GiB on an H100 (Llama-
    3.1-8B) vLLM skips the estimate, so KV is not the requested share's rest: the bar came to
    14.99 + 4.77 + 0.13 + 20 + 7.92 = 47.81 GiB of the GPU's 79.18 (85,020,000,000 B =
    requested 76,518,000,000 / 0.9); the remaining 31.37 GiB, unused, was not drawn (the rest
    is now 79.18 - 39.89 = 39.29 GiB). The page's table also read '= KV cache' beneath the
    requested share, as if it were its rest."""
    cuda_total_gib = 76518000000 / 0.9 / 2**30
    for extra, rest in (({}, "unrequested"),
                        ({"kv_cache_memory": "20GiB"}, "unused (--kv-cache-memory given)")):
        spec = client.get("/api/capacity/chart", params={"model": M, **extra}).json()
        parts = {v["part"]: v["GiB"] for v in spec["data"]["values"]}
        assert sum(parts.values()) == pytest.approx(cuda_total_gib, rel=1e-9)
        assert list(parts)[-1] == rest
    assert parts["KV cache"] == 20.0 and parts[rest] == pytest.approx(39.29, abs=0.01)
    cli = run_cli("capacity", M, "--kv-cache-memory", "20GiB")
    assert "Available KV cache memory: 20.00 GiB (given by --kv-cache-memory)" in cli.out
    page.goto(f"{base}/capacity?kv_cache_memory=20GiB")
    settle(page)
    assert heading(page, "available_kv_bytes") == "KV cache (given by --kv-cache-memory)"
    assert cell_text(page, "available_kv_bytes") == "20.00 GiB"


def test_the_index_keeps_the_links_question(client: Any) -> None:
    """Each page reads its form from the URL's query (a shared link shows the same question);
    '/' redirected to '/model' without it, so '/?model=Qwen/Qwen3-8B&kv_cache_dtype=fp8'
    opened Llama-3.1-8B at auto."""
    r = client.get("/", params={"model": "Qwen/Qwen3-8B", "kv_cache_dtype": "fp8"},
                   follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == "/model?model=Qwen%2FQwen3-8B&kv_cache_dtype=fp8"
    assert client.get("/", follow_redirects=False).headers["location"] == "/model"


def test_a_page_can_cancel_its_earlier_job_that_blocks_a_run(base: str, page: Any) -> None:
    """One job per page client (sessionStorage, so it survives a reload and is shared by the
    Simulate and Plan pages): a Run while the earlier job runs is refused (429, 'cancel it or
    wait for it'), but the refusal gave no job id and the page's Cancel stayed disabled, so
    the page could not cancel it. The refusal now names the job and Cancel stops it."""
    from urllib.request import Request

    page.goto(f"{base}/plan")
    client = page.evaluate("sessionStorage.getItem('kvplanClient')")
    # two requests at a time fit L4's KV at 16k: far more steps than the 60 s job limit
    # allows, so the job is still running whenever the cancel reaches it
    long = {"model": M, "gpu": "L4", "max_model_len": "16k", "num_prompts": 2000,
            "random_input_len": 8000, "random_output_len": 8000}
    req = Request(f"{base}/api/simulate/jobs", data=json.dumps(long).encode(), method="POST",
                  headers={"content-type": "application/json", "x-kvplan-client": client})
    with urlopen(req, timeout=60) as r:
        earlier = json.loads(r.read())["job"]
    for name, value in PLAN.items():
        page.fill(f"input[name={name}]", str(value))
    assert page.is_disabled("#cancel")
    page.click("#run")
    page.wait_for_selector("#cancel:not([disabled])", timeout=10_000)
    assert f"(job {earlier}) is already running" in page.inner_text(".err[data-for=model]")
    page.click("#cancel")
    page.wait_for_function(f"document.getElementById('progress-text').textContent"
                           f" === 'job {earlier} cancelled: Run again'", timeout=10_000)
    for _ in range(600):  # a busy machine: the job sees the cancel at its next check
        state = api(base, f"/api/simulate/jobs/{earlier}")
        if state["state"] != "running":
            break
        page.wait_for_timeout(100)
    assert state["state"] == "cancelled" and state["error"] == "cancelled from the page"
    page.click("#run")
    settle(page)  # the plan runs now
    assert json.loads(page.get_attribute("#plan", "data-json"))["summary"]["status"]


def test_the_pages_offer_every_block_size_vllm_takes(client: Any) -> None:
    """vLLM's --block-size takes 1, 8, 16, 32, 64, 128 and 256 (vllm/config/cache.py
    BlockSize), as the CLI does; the Model, Request and Capacity pages' lists stopped at 8-128,
    so --block-size 256 (or 1) could not be chosen there."""
    import re

    for name in ("model", "request", "capacity"):
        html = client.get(f"/{name}").text
        select = re.search(r'<select name="block_size".*?</select>', html, re.S)
        assert select is not None
        values = re.findall(r'<option value="(\d+)"', select.group(0))
        assert values == ["1", "8", "16", "32", "64", "128", "256"], name
    page = client.get("/api/capacity", params={"model": M, "block_size": 256}).json()
    cli = run_cli("capacity", M, "--block-size", "256", "--json")
    # 51.37 GiB of KV / (256 tokens x 131,072 B) = 1,643 blocks of 256 tokens
    assert page["num_blocks"] == cli.json()["num_blocks"] == 1643


def test_the_api_reference_gives_each_fields_unit(base: str) -> None:
    """/docs listed each field's name, type and default only: request_rate 'number or null',
    kv_cache_memory 'string', prompt 'integer', with no unit (req/s? bytes? tokens?). Each row
    now carries the CLI's --help line for the same flag (`kvplan web` hands the app its help:
    the web never imports the CLI)."""
    import re

    with urlopen(f"{base}/docs", timeout=30) as r:
        html = r.read().decode()

    def row(path: str, field: str) -> str:
        section = html.split(f"<code>GET {path}</code>", 1)[1].split("<h2", 1)[0]
        found = re.search(rf"<tr><td><code>{field}</code></td>(.*?)</tr>", section)
        assert found is not None, (path, field)
        return found.group(1)

    assert "req/s; inf = all at once" in row("/api/simulate", "request_rate")
    assert "KV cache size (e.g. 24GiB)" in row("/api/capacity", "kv_cache_memory")
    assert "Prompt tokens per request (P)." in row("/api/latency", "prompt")
    assert "Tokens held by each request." in row("/api/levers", "context")
    assert "<th>meaning and unit (the CLI's --help)</th>" in html


def test_the_plan_pages_slo_terms_say_their_unit(base: str, page: Any) -> None:
    """The SLO terms table gave limit 300.0, predicted 108.1 and the band's edge with no unit
    (the CLI: 'p99 TTFT 108.05 ms <= 300 ms'); each row now says its term's unit, from its key
    (p99_ttft_ms: ms)."""
    d = run_plan(base, page, **PLAN, request_rate=20)
    terms = d["summary"]["slo_at_band_edge"]
    rows = page.eval_on_selector_all(
        "#plan table.grid:has(caption:text-matches('^SLO terms')) tr",
        "rs => rs.map(r => [...r.cells].slice(0, 3).map(c => c.textContent))")
    assert rows[0] == ["term", "unit", "limit"]
    assert rows[1:] == [[t["key"], "ms", f"{t['limit']:.1f}" if t["limit"] >= 100 else
                         f"{t['limit']:.2f}"] for t in terms]
    assert [t["key"] for t in terms] == ["p99_ttft_ms", "p99_tpot_ms"]
