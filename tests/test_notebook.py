"""Jupyter display: each answer shows as the CLI prints it; nothing loads outside IPython."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.report.views import notebook
from tests.conftest import run_cli

L8B = "meta-llama/Llama-3.1-8B"


class _Formatter:
    def __init__(self) -> None:
        self.by_name: dict[tuple[str, str], Any] = {}

    def for_type_by_name(self, module: str, name: str, fn: Any) -> None:
        self.by_name[(module, name)] = fn


def _shell() -> Any:
    f = _Formatter()
    return types.SimpleNamespace(display_formatter=types.SimpleNamespace(
        formatters={"text/html": f}), formatter=f)


def _plain(html: str) -> str:
    """The text of rich's exported HTML (tags dropped, entities read)."""
    import html as h
    import re

    return h.unescape(re.sub(r"<[^>]+>", "", html))


def test_memory_plan_shows_the_capacity_answer_line_for_line() -> None:
    plan = kvplan.plan_memory(kvplan.load_model(L8B), kvplan.load_gpu("H100"),
                              kvplan.EngineConfig())
    text = _plain(notebook.html(plan))
    # vLLM 0.11 on one H100 (docs/formulas-capacity.md's worked Llama-3.1-8B example)
    assert "GPU KV cache size: 420,832 tokens" in text
    assert "Maximum concurrency for 131,072 tokens per request: 3.21x" in text
    cli = run_cli("capacity", L8B, "--gpu", "H100")
    assert cli.code == 0
    for line in cli.out.splitlines()[-4:]:  # the text lines under the table, as printed
        assert line.strip() in text


def test_latency_result_shows_the_latency_answers_values() -> None:
    r = kvplan.request_latency(kvplan.load_model(L8B), kvplan.load_gpu("H100"),
                               kvplan.EngineConfig(),
                               kvplan.RequestShape(batch=8, prompt_tokens=2048,
                                                   output_tokens=128))
    text = _plain(notebook.html(r))
    doc = run_cli("latency", L8B, "--gpu", "H100", "--batch", "8", "--prompt", "2048",
                  "--output", "128", "--json").json()
    assert f"{1000 * doc['ttft_s']:.2f} ms" in text and f"{1000 * doc['tpot_s']:.2f} ms" in text
    assert "compute" in text and "memory" in text  # prefill / decode bounds


def test_serving_run_shows_the_metrics_table() -> None:
    run = kvplan.simulate_serving(L8B, "H100", workload=kvplan.WorkloadArgs(
        num_prompts=20, request_rate=4.0))
    text = _plain(notebook.html(run))
    m = kvplan.compute_metrics(run.result)
    assert "Successful requests" in text and f"{m.output_throughput:.2f}" in text
    assert f"{L8B} on H100-SXM-80GB: random, 20 requests" in text


def test_plan_shows_the_serve_line() -> None:
    slo = kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:2000"]))
    p = kvplan.plan(L8B, kvplan.WorkloadArgs(num_prompts=40, request_rate=2.0,
                                             random_input_len=64, random_output_len=8),
                    slo, gpus=["H100"], tensor_parallel_sizes=[1], explain=False)
    text = _plain(notebook.html(p))
    assert p.serve_command and " ".join(p.serve_command.split()[:4]) in text


def test_timeline_shows_the_staircase_chart_and_its_table() -> None:
    kv = kvplan.kv_spec(kvplan.load_model("meta-llama/Llama-2-70b-hf"))
    out = notebook.html(kvplan.request_timeline(kv, 2048, 128, chunk_tokens=512))
    assert out.startswith("<div><svg") and "</svg></div>" in out
    assert "94.1%" in _plain(out)  # the lesson's prefill share of the final cache


def test_enable_registers_every_type_by_name() -> None:
    shell = _shell()
    assert notebook.enable(shell) is True
    assert {name for _, name in shell.formatter.by_name} == set(notebook.RENDERED)
    plan = kvplan.plan_memory(kvplan.load_model(L8B), kvplan.load_gpu("H100"),
                              kvplan.EngineConfig())
    key = (type(plan).__module__, type(plan).__name__)
    assert shell.formatter.by_name[key](plan) == notebook.html(plan)


def test_no_running_shell_registers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert notebook.enable() is False
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert notebook.enable() is False


def test_an_unrendered_type_says_which_are() -> None:
    with pytest.raises(TypeError, match="renders no object; it renders MemoryPlan"):
        notebook.html(object())


def _python(code: str, tmp_path: Path) -> str:
    src = Path(kvplan.__file__).parents[1]
    env_path = f"{tmp_path}:{src}"
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env={"PYTHONPATH": env_path}, check=True)
    return out.stdout.strip()


def test_import_in_ipython_enables_and_plain_import_stays_light(tmp_path: Path) -> None:
    pkg = tmp_path / "IPython"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import types
        seen = []
        class _F:
            def for_type_by_name(self, module, name, fn):
                seen.append(name)
        _shell = types.SimpleNamespace(display_formatter=types.SimpleNamespace(
            formatters={"text/html": _F()}))
        def get_ipython():
            return _shell
    """))
    got = _python("import IPython, kvplan; print(len(IPython.seen))", tmp_path)
    assert got == str(len(notebook.RENDERED))
    plain = _python("import sys, kvplan; print('kvplan.report.views.notebook' in sys.modules, "
                    "'rich' in sys.modules)", tmp_path / "none")
    assert plain == "False False"
