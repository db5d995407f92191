"""fuzz-3 R1, R2 and issue 19 item 2: every file a command reads is an input, whatever name led
to it (a model id resolved through the Hugging Face cache or the bundled catalog, a trace-cache
entry), and an output over any of them is refused; a FIFO or device given as any kind of input
is refused at once instead of hanging (or reading forever)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.report.outputs import check_output, input_files
from tests.conftest import CliResult, assert_one_line_error
from tests.fuzz.harness import run_cli, verdict
from tests.fuzz2_support import CFG1B, L1B, MCSV, assert_error, run_case

SRC = Path(__file__).resolve().parents[1] / "src" / "kvplan"


def hf_cache(root: Path, repo: str = "acme/Widget") -> Path:
    """huggingface_hub's layout: snapshots/REV/config.json -> ../../blobs/HASH; returns the
    snapshot's config.json path."""
    folder = root / "hub" / ("models--" + repo.replace("/", "--"))
    for sub in ("blobs", "snapshots/abc", "refs"):
        (folder / sub).mkdir(parents=True)
    (folder / "blobs" / "b1").write_text(CFG1B)
    (folder / "snapshots/abc/config.json").symlink_to("../../blobs/b1")
    (folder / "refs/main").write_text("abc")
    return folder / "snapshots/abc/config.json"


# ------------------------------------------------- R1: the config a model id resolved to


@pytest.mark.parametrize("through", ["snapshot link", "blob"])
def test_save_result_onto_the_hf_cache_config_is_refused(
        through: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: exit 0, 'wrote .../snapshots/abc/config.json -> .../blobs/b1 (replaced)', and every
    later command on the model failed (the check was given the id, not the file)."""
    snap = hf_cache(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    target = snap if through == "snapshot link" else snap.resolve()
    result = run_case(tmp_path, ["simulate", "acme/Widget", "--num-prompts", "3",
                                 "--save-result", str(target)])
    assert_error(result, "--save-result", "writing there would destroy it")
    assert snap.read_text() == CFG1B


def test_the_cache_refs_file_the_lookup_read_is_never_an_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the new HF-cache fuzz family: refs/main (read by huggingface_hub's lookup,
    outside kvplan's record) was overwritten by --save-result, exit 0."""
    snap = hf_cache(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    refs = tmp_path / "hub/models--acme--Widget/refs/main"
    result = run_case(tmp_path, ["simulate", "acme/Widget", "--num-prompts", "2",
                                 "--save-result", str(refs)])
    assert_error(result, "--save-result", "a file this command reads")
    assert refs.read_text() == "abc" and snap.read_text() == CFG1B


def test_a_fifo_as_the_cache_refs_file_does_not_hang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """refs/main a FIFO: the lookup falls back to the newest snapshot instead of blocking."""
    hf_cache(tmp_path)
    refs = tmp_path / "hub/models--acme--Widget/refs/main"
    refs.unlink()
    os.mkfifo(refs)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    run = run_cli(["kv", "acme/Widget", "--json"], cwd=tmp_path)
    assert verdict(run) == "ok", (run.crash, run.err)


def test_calibrate_out_onto_the_models_cached_config_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = hf_cache(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    result = run_case(tmp_path, ["calibrate", "m.csv", "--model", "acme/Widget", "--out",
                                 str(snap)], {"m.csv": MCSV})
    assert_error(result, "--out", "writing there would destroy it")
    assert snap.read_text() == CFG1B


def test_a_model_ids_bundled_config_is_one_of_its_inputs() -> None:
    """The catalog file an id resolves to (checked without writing: a failing test must not
    damage the package)."""
    catalog = SRC / "specs/catalog/models/meta-llama--Llama-3.2-1B.json"
    assert [p.resolve() for p in input_files(L1B)] == [catalog.resolve()]
    with pytest.raises(InputError, match=r"destroy it|kvplan's own package"):
        check_output(catalog, "--save-result", input_files(L1B))


@pytest.mark.parametrize("name", ["data/prices/prices.csv", "data/profiles/default.json",
                                  "specs/catalog/gpus/gpus.json", "new-file.json"])
def test_no_output_lands_in_kvplans_package(name: str) -> None:
    """Bundled data (prices, the default profile, the GPU catalog) is read by every command."""
    with pytest.raises(InputError, match=r"kvplan's own package|a file this command reads"):
        check_output(SRC / name, "--save-result")


def test_a_file_read_during_the_work_is_refused_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace cache entry the run read (its name is a hash no flag gives) is an input."""
    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "cache"))
    trace = {"t.csv": "timestamp,input_length,output_length,hash_ids\n0,100,10,1\n5,200,20,2\n"}
    run_case(tmp_path, ["simulate", L1B, "--trace", "t.csv", "--json"], trace)
    entries = list((tmp_path / "cache" / "traces").glob("*.npz"))
    assert len(entries) == 1
    before = entries[0].read_bytes()
    result = run_case(tmp_path, ["simulate", L1B, "--trace", "t.csv", "--save-result",
                                 str(entries[0]), "--json"])
    assert_error(result, "a file this command reads", "destroy it")
    assert entries[0].read_bytes() == before


# ------------------------------------------------- R2: FIFOs and devices as every kind of input

LAT = ["latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "4"]
FIFO_CASES = {
    "config": ["kv", "f.json"],
    "config-folder": ["kv", "d"],
    "trace": ["simulate", L1B, "--trace", "f.csv"],
    "gpu-file": ["capacity", L1B, "--gpu", "f.yaml"],
    "profile": [*LAT, "--profile", "f.json"],
    "prices": ["prices", "--prices", "f.csv"],
    "plan-prices": ["plan", L1B, "--gpu", "H100", "--num-prompts", "20", "--sample-requests",
                    "20", "--slo", "ttft:p99:5000", "--prices", "f.csv"],
    "calibrate": ["calibrate", "f.json", "--gpu", "H100"],
    "calibrate-csv": ["calibrate", "f.csv", "--gpu", "H100"],
    "report-plan": ["report", "--plan", "f.json", "-o", "r.html"],
}


@pytest.mark.parametrize("case", sorted(FIFO_CASES))
def test_a_fifo_as_any_input_is_refused_at_once(case: str, tmp_path: Path) -> None:
    """Was: `kvplan prices --prices FIFO` blocked forever in read_text (open waits for a
    writer); now the file is opened non-blocking and must be a regular file."""
    argv = FIFO_CASES[case]
    name = "d/config.json" if case == "config-folder" else next(
        a for a in argv if a.startswith("f."))
    (tmp_path / name).parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / name)
    run = run_cli(argv, cwd=tmp_path)
    assert verdict(run) == "error", (run.crash, run.err)
    assert "named pipe (FIFO), not a regular file" in run.err


@pytest.mark.parametrize("argv", [["kv", "/dev/zero"], ["capacity", L1B, "--gpu", "zero.yaml"],
                                  ["simulate", L1B, "--trace", "/dev/zero"],
                                  ["prices", "--prices", "/dev/zero"]])
def test_a_device_as_an_input_is_refused(argv: list[str], tmp_path: Path) -> None:
    """/dev/zero never ends: reading it filled memory. Run in a child with its address space
    capped at 4 GiB, so a regression fails this test instead of the machine."""
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    proc = subprocess.run([sys.executable, "-m", "kvplan", *argv], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, preexec_fn=cap_memory)
    assert_one_line_error(CliResult(proc.returncode, proc.stdout, proc.stderr))
    assert "a character device, not a regular file" in proc.stderr, proc.stderr


def test_a_fifo_is_never_opened_for_writing_either(tmp_path: Path) -> None:
    """Output side (held before, kept): a FIFO output is refused before any work."""
    os.mkfifo(tmp_path / "out.json")
    run = run_cli(["simulate", L1B, "--num-prompts", "2", "--save-result", "out.json"],
                  cwd=tmp_path)
    assert verdict(run) == "error" and "not a regular file" in run.err
