"""`kvplan report`: one self-contained HTML file that opens with the network off and draws."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli
from tests.webtools import chromium, screenshot

M = "meta-llama/Llama-3.1-8B"


def test_report_opens_offline_and_draws_its_charts(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    r = run_cli("report", M, "--gpu", "H100", "--num-prompts", "100", "--request-rate", "10",
                "-o", str(out))
    assert r.code == 0, r.err
    assert r.out.startswith(f"wrote {out}")
    html = out.read_text()
    assert not re.search(r"""(src|href)=["']https?:""", html)
    data = json.loads(re.search(r'id="kvplan-data">(.*?)</script>', html, re.S).group(1))
    ids = [s["id"] for s in data["sections"]]
    assert ids == ["model", "request", "capacity", "latency", "simulate"]
    assert data["sections"][0]["answer"]["kv"]["bytes_per_token"] == 131072
    requested: list[str] = []
    with chromium(offline=True) as ctx:
        ctx.route("**/*", lambda route: (requested.append(route.request.url),
                                         route.continue_() if route.request.url.startswith(
                                             "file:") else route.abort()))
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-state=done]", state="attached", timeout=30_000)
        drawn = page.eval_on_selector_all(".chart svg", "s => s.length")
        screenshot(page, "report")
    assert errors == []
    assert drawn == sum(len(s["charts"]) for s in data["sections"]) == 7
    assert requested == [out.as_uri()]


def test_report_refuses_bad_output_names(tmp_path: Path) -> None:
    for bad in (str(tmp_path / "r.txt"), str(tmp_path / "no" / "r.html"), str(tmp_path)):
        assert_one_line_error(run_cli("report", M, "-o", bad))
    assert list(tmp_path.iterdir()) == []


def test_report_of_a_saved_plan(tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    r = run_cli("plan", M, "--gpu", "H100-SXM-80GB", "--tensor-parallel-size", "1",
                "--num-prompts", "100", "--request-rate", "5", "--slo", "ttft:p99:2000",
                "--workers", "1", "--json")
    assert r.code == 0, r.err
    saved.write_text(r.out)
    out = tmp_path / "plan.html"
    done = run_cli("report", "--plan", str(saved), "-o", str(out))
    assert done.code == 0, done.err
    html = out.read_text()
    data = json.loads(re.search(r'id="kvplan-data">(.*?)</script>', html, re.S).group(1))
    assert [s["id"] for s in data["sections"]] == ["plan", "candidates", "levers"]
    assert data["sections"][0]["answer"]["summary"] == r.json()["summary"]
    assert "vllm serve meta-llama/Llama-3.1-8B" in html
    # ttft:p99:2000 (ms) as `kvplan plan` writes the limit: 2000 / 1000 = 2 s
    assert "p99_ttft_ms (limit 2 s)" in html and "band (10-90%)" in html
    with chromium(offline=True) as ctx:
        page = ctx.new_page()
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-state=done]", state="attached", timeout=30_000)
        assert page.eval_on_selector_all(".chart svg", "s => s.length") == 2  # Pareto, costs
        screenshot(page, "report-plan")
    assert_one_line_error(run_cli("report", "--plan", str(out), "-o", str(tmp_path / "y.html")))
