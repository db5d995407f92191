"""fuzz-3 R3-R6: what a file holds (bytes that are not UTF-8, a CSV field over csv's limit,
JSON nested 100,000 deep) and a standard output that cannot be written are one ``error:`` line
each, never a traceback."""

from __future__ import annotations

import errno
import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tests.conftest import CliResult, assert_one_line_error
from tests.fuzz2_support import L1B, assert_error, run_case

HEADER = ("gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
          "source_url,observed_on,transcribed_by\n")
ROW = "H100-SXM-80GB,me,{instance},1,1,2.5,https://x,2026-01-01,me\n"
PLAN = ["plan", L1B, "--gpu", "H100", "--num-prompts", "20", "--sample-requests", "20",
        "--slo", "ttft:p99:5000", "--prices", "p.csv"]
DEEP = "[" * 100_000 + "]" * 100_000


# ------------------------------------------------- R3, R4: price files


@pytest.mark.parametrize("argv", [["prices", "--prices", "p.csv"], PLAN])
def test_a_price_file_that_is_not_utf8_is_one_error(argv: list[str], tmp_path: Path) -> None:
    """Was UnicodeDecodeError: only OSError was caught around read_text()."""
    result = run_case(tmp_path, argv, {"p.csv": b"\x80\x81gpu,provider\n"})
    assert_error(result, "--prices p.csv", "not UTF-8 text (byte 0x80 at offset 0)")


@pytest.mark.parametrize("argv", [["prices", "--prices", "p.csv", "--json"], PLAN])
def test_a_price_field_over_the_csv_limit_is_one_error(argv: list[str], tmp_path: Path) -> None:
    """Was _csv.Error: field larger than field limit (131072), raised by the reader itself,
    outside the per-row handler."""
    text = HEADER + ROW.format(instance="x" * 200_000)
    result = run_case(tmp_path, argv, {"p.csv": text})
    assert_error(result, "--prices p.csv line 2", "field larger than field limit")


@pytest.mark.parametrize("name,text", [
    ("m.csv", "model,gpu,batch,prompt,output,ttft_ms\n" + L1B + ",H100,1,512,64," + "1" * 200_000),
    ("s.csv", "model,gpu,max_concurrency,mean_ttft_ms\n" + L1B + ",H100,4," + "1" * 200_000),
])
def test_a_calibration_csv_field_over_the_limit_is_one_error(name: str, text: str,
                                                             tmp_path: Path) -> None:
    result = run_case(tmp_path, ["calibrate", name, "--gpu", "H100"], {name: text})
    assert_error(result, f"{name}:2: not a readable CSV row", "field larger than field limit")


# ------------------------------------------------- R6: nested JSON wherever JSON is read

DEEP_CASES = {
    "calibrate-bench": (["calibrate", "deep.json", "--gpu", "H100"], "deep.json"),
    "calibrate-points": (["calibrate", "m.json", "--gpu", "H100"], "m.json"),
    "config": (["kv", "deep.json"], "deep.json"),
    "gpu-json": (["capacity", L1B, "--gpu", "g.json"], "g.json"),
    "profile": (["latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "4",
                 "--profile", "p.json"], "p.json"),
    "report-plan": (["report", "--plan", "deep.json", "-o", "r.html"], "deep.json"),
}


@pytest.mark.parametrize("case", sorted(DEEP_CASES))
def test_deeply_nested_json_is_one_error_wherever_json_is_read(case: str,
                                                               tmp_path: Path) -> None:
    """Was RecursionError in calibrate: is_serving_file and read_serving called json.loads,
    not kvplan.jsonread.loads (which turns RecursionError into a JSON error)."""
    argv, name = DEEP_CASES[case]
    result = run_case(tmp_path, argv, {name: DEEP})
    assert_error(result, name)


@pytest.mark.parametrize("name", ["g.json", "g.yaml"])
def test_a_gpu_file_with_a_5000_digit_integer_is_one_error(name: str, tmp_path: Path) -> None:
    """Found by the nested-JSON fuzz family (10,000-example run): PyYAML's int() raised
    ValueError (Python's 4,300-digit limit), which only RecursionError/YAMLError caught."""
    text = ('{"id": "MyGPU", "memory_gb": 80, "mem_bw_tbps": 3.35, "bf16_tflops_dense": '
            + "9" * 5000 + "}")
    result = run_case(tmp_path, ["capacity", L1B, "--gpu", name, "--json"], {name: text})
    assert_error(result, name, "cannot read GPU description")


def test_a_saved_plan_with_a_deeply_nested_value_is_one_error(tmp_path: Path) -> None:
    """Found by the nested-JSON fuzz family: 900-deep nesting parses, then the report's
    dataclasses.asdict recursed past Python's limit (RecursionError)."""
    text = '{"schema": "kvplan.plan/v1", "summary": {"status": ' + "[" * 900 + "]" * 900 + "}}"
    result = run_case(tmp_path, ["report", "--plan", "plan.json", "-o", "r.html"],
                      {"plan.json": text})
    assert_error(result, "--plan plan.json: nested 902 deep")


# ------------------------------------------------- R5: standard output that cannot be written


class _Unwritable(io.StringIO):
    def __init__(self, err: int) -> None:
        super().__init__()
        self.err = err

    def write(self, text: str) -> int:
        raise OSError(self.err, "refused")


def _run_with_stdout(stdout: io.StringIO, argv: list[str]) -> CliResult:
    from kvplan.cli import main

    err, old = io.StringIO(), sys.argv
    sys.argv = ["kvplan", *argv]
    try:
        with redirect_stdout(stdout), redirect_stderr(err), pytest.raises(SystemExit) as exit_:
            main()
    finally:
        sys.argv = old
    code = exit_.value.code
    return CliResult(code if isinstance(code, int) else 1, "", err.getvalue())


STDOUT_ARGS = [["kv", L1B, "--json"], ["kv", L1B], ["models"], ["--help"],
               ["simulate", L1B, "--num-prompts", "2"]]


@pytest.mark.parametrize("argv", STDOUT_ARGS)
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EIO])
def test_stdout_that_cannot_be_written_is_one_error(argv: list[str], code: int) -> None:
    """Was OSError: [Errno 28] No space left on device, from print_json or rich's table."""
    result = _run_with_stdout(_Unwritable(code), argv)
    assert_one_line_error(result)
    assert "cannot write to standard output" in result.err


@pytest.mark.parametrize("argv", STDOUT_ARGS)
def test_a_closed_stdout_pipe_exits_quietly(argv: list[str]) -> None:
    """EPIPE (``kvplan models | head -1``): no message, 141 as for a process SIGPIPE ended."""
    result = _run_with_stdout(_Unwritable(errno.EPIPE), argv)
    assert result.code == 141 and result.err.strip() == "", result


def test_dev_full_as_stdout_is_one_error_in_a_real_process() -> None:
    """The buffered case: the write fails only at the final flush (the process's own)."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "kvplan", "kv", L1B, "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert_one_line_error(CliResult(proc.returncode, "", proc.stderr))
    assert "no space left on the device" in proc.stderr


def test_a_closed_pipe_in_a_real_process_prints_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "models"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err
