"""Helpers for the fuzz-2 regression tests: run the CLI in-process, lay out input files, and
check the contract (exit 0 with valid output, or exit 2 with one ``error:`` line; inputs
byte-identical afterwards; no warnings)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvplan.cli import main
from tests.conftest import CliResult, assert_one_line_error

SRC = Path(__file__).resolve().parents[1] / "src" / "kvplan"
L1B = "meta-llama/Llama-3.2-1B"
CFG1B = (SRC / "specs/catalog/models/meta-llama--Llama-3.2-1B.json").read_text()
PROFILE = (SRC / "data/profiles/default.json").read_text()
GPU = "id: MyGPU\nmemory_gb: 80\nmem_bw_tbps: 3.35\nbf16_tflops_dense: 989\n"
MCSV = "model,gpu,batch,prompt,output,ttft_ms\nmeta-llama/Llama-3.2-1B,H100,1,512,64,12\n"
X300 = "x" * 300

Files = Mapping[str, str | bytes]
"""name -> content; 'name/' = a folder, '@name' = a symlink to content, '%name' = a hard
link to the file named by content."""


def config(**fields: Any) -> str:
    """The 1B config.json with fields replaced."""
    return json.dumps({**json.loads(CFG1B), **fields})


def profile(default: Mapping[str, Any] | None = None, first: Mapping[str, Any] | None = None,
            **top: Any) -> str:
    """The bundled profile file with the default entry, the first entry or top keys changed."""
    data = json.loads(PROFILE)
    data["default"].update(default or {})
    data["profiles"][0].update(first or {})
    data.update(top)
    return json.dumps(data)


def gpu_file(**changes: str) -> str:
    """The small GPU YAML of fuzz-2 with fields replaced or added (values as YAML text)."""
    fields = dict(line.split(": ", 1) for line in GPU.splitlines())
    fields.update(changes)
    return "".join(f"{k}: {v}\n" for k, v in fields.items())


def bench(**changes: Any) -> str:
    """A `vllm bench serve --save-result` JSON for the 1B model on an H100."""
    data = {"model_id": L1B, "gpu": "H100", "completed": 100, "num_prompts": 100,
            "max_concurrency": 8, "total_input_tokens": 51200, "total_output_tokens": 6400,
            "mean_ttft_ms": 30.0, "mean_tpot_ms": 5.0, "output_throughput": 1000.0,
            "request_rate": "inf"}
    return json.dumps({**data, **changes})


def lay_out(folder: Path, files: Files) -> None:
    for name, content in files.items():
        if name.endswith("/"):
            (folder / name).mkdir()
        elif name.startswith("@"):
            os.symlink(str(content), folder / name[1:])
        elif name.startswith("%"):
            os.link(folder / str(content), folder / name[1:])
        else:
            data = content if isinstance(content, bytes) else content.encode()
            (folder / name).write_bytes(data)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file's bytes (not following symlinks)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and not p.is_symlink()}


def invoke(*args: str, cwd: Path) -> CliResult:
    """``kvplan ARGS`` in-process in ``cwd``: exit code, stdout, stderr (warnings included)."""
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd, code = sys.argv, os.getcwd(), 0
    sys.argv = ["kvplan", *args]
    try:
        os.chdir(cwd)
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # what the interpreter would print: a traceback, exit 1
                err.write(traceback.format_exc())
                code = 1
        for w in caught:
            err.write(f"{w.category.__name__}: {w.message}\n")
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
    return CliResult(code, out.getvalue(), err.getvalue())


def run_case(tmp: Path, args: list[str], files: Files | None = None,
             replaced: tuple[str, ...] = ()) -> CliResult:
    """Lay out ``files``, run, and check that every input (every file but those named in
    ``replaced``, old outputs) is byte-identical afterwards."""
    lay_out(tmp, files or {})
    before = snapshot(tmp)
    result = invoke(*args, cwd=tmp)
    after = snapshot(tmp)
    for name, data in before.items():
        if name in replaced:
            continue
        assert after.get(name) == data, f"input {name} was changed: {result}"
    return result


def assert_error(result: CliResult, *fragments: str) -> None:
    """Exit 2, one ``error:`` line on stderr, nothing on stdout, every fragment in it."""
    assert_one_line_error(result)
    assert not result.out, result.out
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def strict_json(text: str) -> Any:
    """Parse exactly one JSON object, refusing NaN and Infinity as strict parsers do."""
    def refuse(name: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {name}")

    doc = json.loads(text, parse_constant=refuse)
    assert isinstance(doc, dict)
    return doc


def assert_ok(result: CliResult, *, as_json: bool = False) -> Any:
    """Exit 0, no traceback or warning; with --json exactly one strict JSON object."""
    assert result.code == 0, (result.code, result.out, result.err)
    assert "Traceback" not in result.err and "Warning" not in result.err, result.err
    return strict_json(result.out) if as_json else result.out
