"""A --gpu file's names are text and its node_gpus a whole number: `id: [1, 2]` was taken as
the name "[1, 2]" and `node_gpus: 2.5` silently truncated to 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import ConfigError
from kvplan.specs.hardware import load_gpu

BASE = "memory_gb: 24\nmem_bw_tbps: 1\nbf16_tflops_dense: 100\n"


def _gpu(tmp_path: Path, extra: str) -> Path:
    f = tmp_path / "gpu.yaml"
    f.write_text(BASE + extra)
    return f


@pytest.mark.parametrize(("extra", "field"), [
    ("id: [1, 2]\n", "id"), ("id: {a: 1}\n", "id"), ("id: ''\n", "id"),
    ("id: X\narch: [hopper]\n", "arch"), ("id: X\nnode_gpus: 2.5\n", "node_gpus"),
])
def test_bad_fields_are_refused_by_name(tmp_path: Path, extra: str, field: str) -> None:
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        load_gpu(str(_gpu(tmp_path, extra)))


def test_numbers_as_names_and_whole_floats_are_read(tmp_path: Path) -> None:
    hw = load_gpu(str(_gpu(tmp_path, "id: 1234\nnode_gpus: 8.0\n")))
    assert hw.id == "1234" and hw.node_gpus == 8
