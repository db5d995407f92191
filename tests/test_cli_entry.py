"""The fast entry answers ``kv`` and ``--version`` as typer does, and hands the rest to typer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvplan.cli.entry import _KV_OPTIONS, kv_args


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
