"""The fast entry answers ``kv`` and ``--version`` as typer does, and hands the rest to typer."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.cli.fast.entry import _KV_OPTIONS, kv_args


def test_fast_kv_options_are_kv_cmds_options() -> None:
    import typer.main

    from kvplan.cli.app import _register, app

    _register(("cmd_kv",))
    cmd = typer.main.get_group(app).commands["kv"]
    opts = {o: p.name for p in cmd.params for o in p.opts if o.startswith("-")}
    assert {o: f for o, (f, _) in _KV_OPTIONS.items()} == {
        o: n for o, n in opts.items() if o != "--json"}


def test_kv_args_parses_plain_runs_and_leaves_the_rest_to_typer() -> None:
    assert kv_args(["kv", "m", "-tp", "2", "--block-size=32", "--json"]) == (
        "m", {"tensor_parallel_size": 2, "block_size": 32}, True)
    assert kv_args(["kv", "--kv-cache-dtype", "fp8", "m"]) == ("m", {"kv_cache_dtype": "fp8"},
                                                               False)
    for args in (["kv"], ["kv", "m", "--help"], ["kv", "m", "-tp", "x"], ["kv", "m", "n"],
                 ["kv", "m", "-tp", "2", "-tp", "4"], ["kv", "m", "--block-size"],
                 ["kv", "m", "--json", "--json"], ["kv", "m", "--"], ["capacity", "m"],
                 ["kv", "m", "--block-size", "-16"], ["kv", "m", "--kv-cache-dtype="]):
        assert kv_args(args) is None, args


def _run(args: list[str], typer_only: bool) -> subprocess.CompletedProcess[str]:
    code = ("import sys; sys.argv = ['kvplan', *sys.argv[1:]]; "
            + ("from kvplan.cli.app import main" if typer_only else "from kvplan.cli import main")
            + "; main()")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": ""} | {"COLUMNS": "120"})


@pytest.mark.parametrize("args", [
    ["kv", "meta-llama/Llama-3.1-8B"], ["kv", "meta-llama/Llama-2-70b-hf", "-tp", "4"],
    ["kv", "google/gemma-3-27b-it", "--kv-cache-dtype", "fp8", "--json"],
    ["kv", "meta-llama/Llama-3.1-8B", "-tp", "3"], ["kv", "acme/unknown-model"], ["--version"]])
def test_fast_entry_prints_what_typer_prints(args: list[str]) -> None:
    fast, slow = _run(args, False), _run(args, True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout,
                                                           slow.stderr)
    assert fast.stdout or fast.stderr


def test_command_index_is_the_registered_commands_in_help_order() -> None:
    import inspect

    import typer.main

    from kvplan.cli.app import _register, app
    from kvplan.cli.fast.command_index import COMMANDS

    _register()
    group = typer.main.get_group(app)
    got = {}
    for name in group.list_commands(None):  # type: ignore[arg-type]
        cmd = group.commands[name]
        first = inspect.cleandoc(cmd.help or "").split("\n\n")[0]
        got[name] = (cmd.callback.__module__.rsplit(".", 1)[-1], " ".join(first.split()))
    assert list(got) == list(COMMANDS)
    assert got == COMMANDS


def _main(argv: list[str], typer_only: bool, columns: str) -> tuple[int, str, str]:
    where = "kvplan.cli.app" if typer_only else "kvplan.cli"
    code = f"import sys; sys.argv = {argv!r}; from {where} import main; main()"
    env = {**os.environ, "COLUMNS": columns}
    env.pop("KVPLAN_RICH_HELP", None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=env)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("columns", ["200", "80", "76", "75", "50"])
@pytest.mark.parametrize("argv", [["kvplan", "--help"], ["kvplan"], ["/usr/bin/kvplan"]])
def test_root_help_is_clicks_plain_help(columns: str, argv: list[str]) -> None:
    fast = _main(argv, False, columns)
    assert fast == _main(argv, True, columns)
    assert fast[0] == 0 and "Commands:" in fast[1]


def test_root_help_under_python_m_names_the_module() -> None:
    p = subprocess.run([sys.executable, "-m", "kvplan", "--help"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "COLUMNS": "100"})
    assert p.stdout.splitlines()[0] == "Usage: python -m kvplan [OPTIONS] COMMAND [ARGS]..."
    assert p.stdout.splitlines()[9] == (
        "  models     List the bundled model catalog (Hugging Face ids, attention...")


_WORDS = st.lists(st.text(alphabet="ab.", min_size=1, max_size=9), max_size=12).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(text=_WORDS, limit=st.integers(3, 60))
def test_short_help_cuts_as_click_does(text: str, limit: int) -> None:
    from typer._click.utils import make_default_short_help

    from kvplan.cli.fast.root_help import short_help

    assert short_help(text, limit) == make_default_short_help(text, limit)


@pytest.mark.parametrize("argv", [
    ["kvplan", "kv", "meta-llama/Llama-3.1-8B", "--json"],
    ["kvplan", "kv", "no-such/model"],  # exits 2
    ["kvplan", "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "5",
     "--json"],
])
def test_main_pauses_the_garbage_collector_and_gives_it_back(
        argv: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Off while modules load (entry.main), on again however main ends; a simulation's
    metrics run with it on."""
    import gc

    from kvplan.cli.fast import simulate_run
    from kvplan.cli.fast.entry import main

    seen: list[bool] = []
    frozen: list[int] = []
    real = simulate_run.run_simulation

    def spy(*a: Any, **k: Any) -> Any:
        seen.append(gc.isenabled())
        out = real(*a, **k)
        seen.append(gc.isenabled())
        frozen.append(gc.get_freeze_count())
        return out

    monkeypatch.setattr(simulate_run, "run_simulation", spy)
    monkeypatch.setattr("sys.argv", argv)
    assert gc.isenabled()
    with contextlib.suppress(SystemExit):
        main()
    capsys.readouterr()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # what the run froze is collectable again
    if argv[1] == "simulate":
        assert seen == [False, True]
        assert frozen[0] > 1000  # the set-up's objects were frozen before the metrics


def test_gc_pause_restores_a_collector_that_was_off() -> None:
    """An in-process caller whose collector was off gets it back off, nothing frozen."""
    import gc

    from kvplan.cli.fast import gc_pause

    gc.disable()
    try:
        gc_pause.pause()
        gc_pause.resume()
        assert gc.isenabled() and gc.get_freeze_count() > 0
        gc_pause.restore()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
