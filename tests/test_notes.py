"""kvplan.notes: notes reach the logger ``kvplan`` (and, asked, stderr once per text), and
``logging`` loads only when a note is made."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from kvplan import notes


def test_a_plain_simulate_never_loads_logging() -> None:
    code = ("import sys; sys.argv = ['kvplan', 'simulate', 'meta-llama/Llama-3.1-8B', '--gpu', "
            "'H100', '--num-prompts', '20', '--json']\n"
            "from kvplan.cli.fast.entry import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('logging' in sys.modules, file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert run.stderr.strip().splitlines()[-1] == "False"
    assert run.stdout.startswith("{")


def test_an_instruct_id_notes_its_base_config_on_stderr_once() -> None:
    code = ("import sys; sys.argv = ['kvplan', 'kv', 'meta-llama/Llama-3.1-8B-Instruct']\n"
            "from kvplan.cli.fast.entry import main\nmain()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0
    lines = [x for x in run.stderr.splitlines() if x.startswith("note: ")]
    assert lines == ["note: using the config of meta-llama/Llama-3.1-8B for "
                     "meta-llama/Llama-3.1-8B-Instruct (Instruct/chat variants share the "
                     "base model's architecture)"]


def test_notes_go_to_todays_stderr_once_per_text(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    log = logging.getLogger("kvplan")
    monkeypatch.setattr(log, "handlers", list(log.handlers))
    monkeypatch.setattr(log, "propagate", log.propagate)
    monkeypatch.setattr(log, "level", log.level)
    monkeypatch.setattr(notes, "_want_stderr", False)
    notes.to_stderr()  # logging is loaded here: the handler goes on at once
    notes.note("a %s note", "first")
    notes.note("a %s note", "first")
    notes.note("another")
    assert capsys.readouterr().err == "note: a first note\nnote: another\n"
    notes.to_stderr()  # a second main(): a fresh handler on today's stderr, a fresh memory
    notes.note("a %s note", "first")
    assert capsys.readouterr().err == "note: a first note\n"
    assert sum(getattr(h, "kvplan_notes", False) for h in log.handlers) == 1
