"""Start-up: plain help without rich (unless KVPLAN_RICH_HELP asks), BLAS pinned to one
thread for the command's simulations unless the user set it."""

from __future__ import annotations

import os
import subprocess
import sys

RUN = ("import os, sys\nsys.argv = ['kvplan', *{argv!r}]\nfrom kvplan.cli import main\n"
       "try:\n    main()\nexcept SystemExit:\n    pass\n"
       "print(sorted(m for m in ('rich', 'markdown_it', 'pygments', 'numpy') if m in "
       "sys.modules), os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)")


def _run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_NUM_THREADS", "KVPLAN_RICH_HELP")}
    return subprocess.run([sys.executable, "-c", RUN.format(argv=argv)], capture_output=True,
                          text=True, check=True, env={**full, **env})


def test_help_is_plain_text_and_imports_no_rich_markdown_pygments_or_numpy() -> None:
    out = _run(["--help"])
    assert out.stderr.strip() == "[] 1"
    assert "Commands:\n  models " in out.stdout and "╭" not in out.stdout


def test_rich_help_when_asked() -> None:
    out = _run(["--help"], KVPLAN_RICH_HELP="1")
    assert "╭─ Commands" in out.stdout
    assert out.stderr.strip().startswith("['markdown_it', 'pygments', 'rich']")


def test_blas_threads_are_one_unless_the_user_set_them() -> None:
    assert _run(["gpus", "--json"]).stderr.strip().endswith(" 1")
    assert _run(["gpus", "--json"], OPENBLAS_NUM_THREADS="3").stderr.strip().endswith(" 3")


LOADED = ("import sys\nsys.argv = ['kvplan', *{argv!r}]\nfrom kvplan.cli import main\n"
          "try:\n    main()\nexcept SystemExit:\n    pass\n"
          "print(sorted(m for m in {names!r} if m in sys.modules), file=sys.stderr)")
LAZY = ("logging", "kvplan.costs.kernels.mla", "kvplan.costs.kernels.donor",
        "kvplan.analysis.plan")


def _loaded(argv: list[str]) -> list[str]:
    run = subprocess.run([sys.executable, "-c", LOADED.format(argv=argv, names=LAZY)],
                         capture_output=True, text=True, check=True)
    import ast

    out: list[str] = ast.literal_eval(run.stderr.strip().splitlines()[-1])
    return out


def test_a_dense_simulate_loads_no_mla_or_donor_lookups_no_planner_and_no_logging() -> None:
    assert _loaded(["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                    "--num-prompts", "20", "--json"]) == []


def test_an_moe_mla_model_loads_what_it_prices() -> None:
    got = _loaded(["latency", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100", "--prompt",
                   "512", "--output", "8", "--json"])
    assert "kvplan.costs.kernels.mla" in got


def test_the_kernel_packages_names_are_its_functions_whatever_loaded_first() -> None:
    """kernels.moe (function) beside the submodule kernels.moe; the lazy MLA names."""
    import kvplan.costs.kernels.mla  # noqa: F401 (the submodule first, then the names)
    from kvplan.costs import kernels as K

    assert callable(K.moe) and callable(K.mla_context_s) and callable(K.nearest_measured_gpu)
