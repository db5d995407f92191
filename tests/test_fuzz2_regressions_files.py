"""fuzz-2 F1, F9, F27 (and issue 11 item 3): output files are checked before any work, never
one of the inputs, written atomically, and each write says ``wrote FILE``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.report.outputs import check_output, write_output
from tests.fuzz2_support import (
    CFG1B,
    GPU,
    L1B,
    MCSV,
    PROFILE,
    X300,
    assert_error,
    assert_ok,
    run_case,
)

SIM = ["simulate", L1B, "--num-prompts", "3"]
REQ = ["request", L1B, "--prompt", "100", "--output", "5"]
M_JSON = json.dumps([{"model": L1B, "gpu": "H100", "batch": 1, "prompt": 512, "output": 64,
                      "ttft_ms": 12}])

# ---------------------------------------------------------------- F1: inputs never overwritten

F1_CASES = {
    "F1-config": (["simulate", "config.json", "--num-prompts", "3", "--save-result",
                   "config.json"], {"config.json": CFG1B}, "config.json"),
    "F1-config-folder": (["simulate", ".", "--num-prompts", "3", "--save-result", "config.json"],
                         {"config.json": CFG1B}, "config.json"),
    "F1-gpu": ([*SIM, "--gpu", "gpu.yaml", "--save-result", "gpu.yaml"], {"gpu.yaml": GPU},
               "gpu.yaml"),
    "F1-profile": ([*SIM, "--profile", "p.json", "--save-result", "p.json"], {"p.json": PROFILE},
                   "p.json"),
    "F1-trace": ([*SIM[:2], "--trace", "t.csv", "--save-result", "t.csv"],
                 {"t.csv": "prompt,output\n10,2\n"}, "t.csv"),
    "F1-calibrate-csv": (["calibrate", "m.csv", "--out", "m.csv"], {"m.csv": MCSV}, "m.csv"),
    "F1-calibrate-json": (["calibrate", "m.json", "--out", "m.json"], {"m.json": M_JSON},
                          "m.json"),
    "F1-hardlink": (["calibrate", "m.csv", "--out", "hl.csv"], {"m.csv": MCSV, "%hl.csv": "m.csv"},
                    "m.csv"),
    "F1-symlink": ([*SIM, "--gpu", "gpu.yaml", "--save-result", "l.json"],
                   {"gpu.yaml": GPU, "@l.json": "gpu.yaml"}, "gpu.yaml"),
    "F1-request-plot": (["request", "config.json", "--prompt", "10", "--output", "2", "--plot",
                         "c.svg"], {"config.json": CFG1B, "@c.svg": "config.json"}, "config.json"),
}


@pytest.mark.parametrize("case", sorted(F1_CASES))
def test_f1_an_input_is_never_an_output(case: str, tmp_path: Path) -> None:
    args, files, name = F1_CASES[case]
    assert_error(run_case(tmp_path, args, files), "is the input", name)


# ---------------------------------------------------------------- F9: checked before the work

F9_CASES = {
    "F9-missing-folder": ([*SIM, "--save-result", "no/such/dir/run.json"], {}, "does not exist"),
    "F9-parent-is-file": ([*SIM, "--save-result", "notadir.txt/run.json"], {"notadir.txt": "x"},
                          "notadir.txt is a file, not a folder"),
    "F9-dev-full": ([*SIM, "--save-result", "/dev/full"], {}, "not a regular file"),
    "F9-dangling": ([*SIM, "--save-result", "d.json"], {"@d.json": "nowhere/x.json"},
                    "does not exist"),
    "F9-folder": (["calibrate", "m.csv", "--out", "outdir"], {"m.csv": MCSV, "outdir/": ""},
                  "is a directory"),
    "F9-cal-missing": (["calibrate", "m.csv", "--out", "no/such/dir/p.json"], {"m.csv": MCSV},
                       "does not exist"),
    "F9-cal-parent-file": (["calibrate", "m.csv", "--out", "notadir.txt/p.json"],
                           {"m.csv": MCSV, "notadir.txt": "x"}, "is a file, not a folder"),
    "F9-cal-dev-full": (["calibrate", "m.csv", "--out", "/dev/full"], {"m.csv": MCSV},
                        "not a regular file"),
    "F9-request-parent-file": ([*REQ, "--plot", "notadir.txt/c.svg"], {"notadir.txt": "x"},
                               "is a file, not a folder"),
    "F9-request-dangling": ([*REQ, "--plot", "c.svg"], {"@c.svg": "nowhere/c.svg"},
                            "does not exist"),
    "F9-sim-plot-parent-file": ([*SIM, "--plot", "notadir.txt/c.svg"], {"notadir.txt": "x"},
                                "is a file, not a folder"),
    "F9-sim-plot-dangling": ([*SIM, "--plot", "c.svg"], {"@c.svg": "nowhere/c.svg"},
                             "does not exist"),
    "F9-sim-long-name": ([*SIM, "--plot", X300 + ".svg"], {}, "choose a shorter name"),
    "F9-request-long-name": ([*REQ, "--plot", X300 + ".svg"], {}, "choose a shorter name"),
    "F9-same-file-twice": ([*SIM, "--save-result", "a.html", "--plot", "a.html"], {},
                           "the same file"),
}


@pytest.mark.parametrize("case", sorted(F9_CASES))
def test_f9_bad_output_paths_fail_at_once(case: str, tmp_path: Path) -> None:
    args, files, fragment = F9_CASES[case]
    assert_error(run_case(tmp_path, args, files), fragment)


def test_f9_the_check_comes_before_the_simulation(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.cli.fast.simulate_run as cmd  # simulate's work, typer's path and the fast one

    def never(*_: object, **__: object) -> None:
        raise AssertionError("simulated before checking the output path")

    monkeypatch.setattr(cmd, "run_simulation", never)
    assert_error(run_case(tmp_path, [*SIM, "--save-result", "no/dir/r.json"]), "does not exist")


def test_f9_a_write_error_is_one_line_and_leaves_no_file(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out = check_output(tmp_path / "r.json", "--save-result")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(InputError, match="no space left on the device"):
        write_output(out, b"x" * 100_000)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == []  # no half-written file, no temporary left


# ---------------------------------------------------------------- F27: replacing says so


def test_f27_simulate_replaces_and_says_so(tmp_path: Path) -> None:
    result = run_case(tmp_path, [*SIM, "--save-result", "run.json", "--json"], {})
    assert_ok(result, as_json=True)
    assert result.err.strip() == "wrote run.json"
    again = run_case(tmp_path, [*SIM, "--save-result", "run.json"], {})
    assert "wrote run.json (replaced)" in assert_ok(again)
    assert json.loads((tmp_path / "run.json").read_text())["num_prompts"] == 3


def test_f27_request_plot_replaces_and_says_so(tmp_path: Path) -> None:
    out = assert_ok(run_case(tmp_path, [*REQ, "--plot", "c.svg"], {"c.svg": "old"}, ("c.svg",)))
    assert "wrote c.svg (replaced)" in out
    assert (tmp_path / "c.svg").read_text().startswith("<svg")


def test_f27_calibrate_out_replaces_and_says_so(tmp_path: Path) -> None:
    # --force: one measured value for three factors is refused otherwise (issue 9, item 3)
    out = assert_ok(run_case(tmp_path, ["calibrate", "m.csv", "--out", "p.json", "--force"],
                             {"m.csv": MCSV, "p.json": "old"}, ("p.json",)))
    assert "wrote p.json (replaced)" in out
    assert json.loads((tmp_path / "p.json").read_text())["schema"] == "kvplan-profile/1"


def test_f27_a_symlink_is_followed_and_named(tmp_path: Path) -> None:
    out = assert_ok(run_case(tmp_path, ["calibrate", "m.csv", "--out", "link.json", "--force"],
                             {"m.csv": MCSV, "other.json": "old", "@link.json": "other.json"},
                             ("other.json",)))
    assert f"wrote link.json -> {tmp_path / 'other.json'} (replaced)" in out
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "other.json").read_text())["schema"] == "kvplan-profile/1"


def test_new_files_get_umask_permissions_and_old_files_keep_theirs(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        new = check_output(tmp_path / "a.json", "--out")
        assert write_output(new, "{}") == f"wrote {tmp_path / 'a.json'}"
        assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
        (tmp_path / "b.json").write_text("old")
        (tmp_path / "b.json").chmod(0o600)
        write_output(check_output(tmp_path / "b.json", "--out"), "{}")
        assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(mask)


PLAN = ["plan", "config.json", "--gpu", "H100", "-tp", "1", "--num-prompts", "20",
        "--slo", "ttft:p99:2000"]


@pytest.mark.parametrize(("plot", "files", "fragment"), [
    ("p.svg", {"config.json": CFG1B, "@p.svg": "config.json"}, "is the input"),
    ("no/such/p.svg", {"config.json": CFG1B}, "does not exist"),
])
def test_plan_plot_is_checked_before_the_search(plot: str, files: dict[str, str], fragment: str,
                                                tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.cli.cmd_plan as cmd

    def never(*_: object, **__: object) -> None:
        raise AssertionError("searched before checking --plot")

    monkeypatch.setattr(cmd, "run_plan", never)
    assert_error(run_case(tmp_path, [*PLAN, "--plot", plot], files), fragment)
