"""run_cli's forked runs (tests/cli_zygote.py) see what a fresh ``python -m`` sees: the same
argv, cwd, sys.path[0], open files, environment, warning filters (printed, not recorded),
hooks, signal handlers, stdio, no kvplan module loaded, and they end as the interpreter
ends (exit status, traceback, atexit handlers, flushed output, universal newlines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import cli_zygote

ROOT = Path(__file__).resolve().parent.parent


def _both(action: str, tmp: Path) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    env = {**os.environ, "ZYGOTE_PROBE": "yes", "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    forked = cli_zygote.run((action,), tmp, env, 60, module="tests.zygote_probe")
    fresh = subprocess.run([sys.executable, "-m", "tests.zygote_probe", action], cwd=tmp,
                           env=env, capture_output=True, text=True, timeout=60)
    assert forked is not None
    return forked, (fresh.returncode, fresh.stdout, fresh.stderr)


@pytest.mark.parametrize(("action", "code"), [("exit:0", 0), ("exit:3", 3), ("none", 0),
                                              ("exit:why", 1), ("raise", 1)])
def test_a_forked_run_is_a_fresh_interpreters_run(action: str, code: int,
                                                  tmp_path: Path) -> None:
    (code_f, out_f, err_f), (code_s, out_s, err_s) = _both(action, tmp_path)
    state_f, state_s = json.loads(out_f.splitlines()[0]), json.loads(out_s.splitlines()[0])
    assert state_f == state_s
    assert state_s["kvplan"] == [] and state_s["env"] == "yes"
    assert state_s["cwd"] == state_s["path0"] == str(tmp_path)
    assert (code_f, out_f, err_f) == (code_s, out_s, err_s)
    assert code_s == code
    assert out_s.endswith("crlf\nend\natexit ran\n")
    assert "UserWarning: probe warning" in err_s and "hidden" not in err_s
    if action == "raise":
        assert "Traceback" in err_s and err_s.endswith("ValueError: probe failure\n")
