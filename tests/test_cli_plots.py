"""`--plot` on capacity and latency sweeps: the same charts the web page draws."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"


def test_capacity_plot_writes_the_budget_bar(tmp_path: Path) -> None:
    out = tmp_path / "budget.svg"
    r = run_cli("capacity", M, "--gpu", "H100", "--plot", str(out))
    assert r.code == 0, r.err
    assert f"wrote {out}" in r.out
    assert out.read_text().lstrip().startswith("<svg") and "KV cache" in out.read_text()


def test_latency_sweep_plot(tmp_path: Path) -> None:
    out = tmp_path / "sweep.html"
    r = run_cli("latency", M, "--gpu", "H100", "--prompt", "512", "--output", "64",
                "--sweep", "batch=1,8,64", "--plot", str(out), "--json")
    assert r.code == 0, r.err
    assert r.json()["lever"] == "batch" and f"wrote {out}" in r.err
    assert "vegaEmbed" in out.read_text()


def test_plot_refusals(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("latency", M, "--gpu", "H100", "--prompt", "8", "--output",
                                  "8", "--plot", str(tmp_path / "x.png")))
    assert_one_line_error(run_cli("capacity", M, "--plot", str(tmp_path / "x.txt")))
    assert list(tmp_path.iterdir()) == []
