"""The console entry's quick end after a fast path (cli/fast/quick_exit.py): the same output,
status, atexit handlers and cache files as the interpreter's own exit, without its teardown;
typer's commands, an in-process ``main`` and a live thread keep the normal exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

L1B = "meta-llama/Llama-3.2-1B"
SIM = ["simulate", "meta-llama/Llama-2-7b-hf", "--gpu", "H100", "--num-prompts", "30",
       "--seed", "3", "--json"]
PROBE = ("import atexit, sys\n"
         "class Teardown:\n"
         "    def __del__(self):\n"
         "        sys.stderr.write('teardown\\n')\n"
         "keep = Teardown()  # freed only when the interpreter tears this module down\n"
         "atexit.register(lambda: sys.stderr.write('atexit\\n'))\n"
         "{extra}"
         "sys.argv = ['kvplan', *sys.argv[1:]]\n"
         "from kvplan.cli import {entry}\n"
         "{entry}()\n")


def _probe(argv: list[str], entry: str = "console", extra: str = "",
           **env: str) -> subprocess.CompletedProcess[str]:
    code = PROBE.format(entry=entry, extra=extra)
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def _plain(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """The same command through ``main`` in a process that exits the normal way."""
    return subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['kvplan', "
                           "*sys.argv[1:]]; from kvplan.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


@pytest.mark.parametrize("argv", [SIM, ["kv", L1B], ["kv", L1B, "--json"],
                                  ["kv", "acme/unknown-model"], ["simulate", L1B, "--gpu", "H100",
                                                                 "--num-prompts", "0"]])
def test_a_fast_path_ends_without_teardown_with_the_same_output_and_status(
        argv: list[str]) -> None:
    quick, plain = _probe(argv), _plain(argv)
    assert (quick.returncode, quick.stdout) == (plain.returncode, plain.stdout)
    assert quick.stderr == plain.stderr + "atexit\n"  # atexit ran; no teardown line
    assert quick.returncode in (0, 2) and (quick.stdout or plain.stderr)


def test_typer_commands_and_in_process_main_keep_the_normal_exit() -> None:
    typer_run = _probe(["gpus", "--json"])
    assert typer_run.returncode == 0 and typer_run.stderr.endswith("atexit\nteardown\n")
    in_process = _probe(["kv", L1B], entry="main")
    assert in_process.returncode == 0 and in_process.stderr.endswith("atexit\nteardown\n")


def test_a_live_thread_keeps_the_normal_exit_which_waits_for_it() -> None:
    extra = ("import threading, time\n"
             "threading.Thread(target=lambda: (time.sleep(0.3), "
             "sys.stdout.write('thread done\\n'))).start()\n")
    got = _probe(["kv", L1B, "--json"], extra=extra)
    assert got.returncode == 0 and got.stdout.endswith("thread done\n")
    assert got.stderr.endswith("atexit\nteardown\n")


def test_a_profiler_still_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "run.prof"
    got = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kvplan",
                          "kv", L1B, "--json"], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and out.stat().st_size > 1000


def test_the_dataclass_code_cache_is_still_saved(tmp_path: Path) -> None:
    got = _probe(["kv", L1B], KVPLAN_CACHE_DIR=str(tmp_path))
    assert got.returncode == 0 and "teardown" not in got.stderr
    files = list((tmp_path / "code").iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 10_000


def test_a_closed_pipe_after_a_fast_path_is_still_a_quiet_141() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", *SIM],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_end_returns_where_the_normal_exit_must_run() -> None:
    from kvplan.cli.fast import quick_exit

    for status in ("a message", 256, -1, 2.0):
        assert quick_exit.end(status) is None  # still here: the caller exits normally
