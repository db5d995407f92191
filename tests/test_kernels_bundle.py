"""The bundled silicon data: provenance, license notice, size, and loading only on demand."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

from kvplan.costs import kernels as K

DATA = resources.files("kvplan") / "data" / "silicon"


def test_manifest_names_the_source_and_each_tables_engine_version() -> None:
    manifest = K.manifest()
    assert manifest["source"] == {"package": "aiconfigurator-core", "version": "0.12.0",
                                  "license": "Apache-2.0", "notice": "NOTICE"}
    assert set(K.measured_gpus()) == {"A100-80GB-SXM", "H100-SXM-80GB", "H200-SXM-141GB",
                                      "B200-SXM-180GB", "GB200", "L40S"}
    versions = {(g, f): (e.get("engine"), e.get("version"))
                for g, entry in manifest["gpus"].items() for f, e in entry["tables"].items()}
    assert versions["H100-SXM-80GB", "gemm"] == ("vllm", "0.24.0")
    assert versions["A100-80GB-SXM", "gemm"] == ("vllm", "0.14.0")
    assert versions["L40S", "allreduce"] == ("vllm", "0.22.0")
    assert versions["H100-SXM-80GB", "nccl"] == ("nccl", "2.29.2")
    assert versions["A100-80GB-SXM", "mla_ctx"] == (None, None)  # no vLLM MLA table on A100
    assert manifest["dropped"]


def test_notice_and_license_ship_with_the_data() -> None:
    notice = (DATA / "NOTICE").read_text(encoding="utf-8")
    assert "NVIDIA CORPORATION" in notice and "Apache License, Version 2.0" in notice
    license_text = (DATA / "LICENSE-Apache-2.0.txt").read_text(encoding="utf-8")
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in license_text


def test_bundle_is_small() -> None:
    total = sum(item.stat().st_size for item in DATA.iterdir())  # type: ignore[attr-defined]
    assert total <= 20 * 2**20
    assert total < 4 * 2**20  # 3.2 MiB today: a jump means the derive kept too much


def test_import_kvplan_loads_no_table() -> None:
    code = ("import sys, kvplan; print(any(m.startswith('kvplan.costs.kernels') "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_answers_cite_their_table() -> None:
    answer = K.gemm("B200", 4096, 4096, 4096)
    assert answer.describe() == "measured (B200-SXM-180GB gemm, vllm 0.24.0)"
    assert answer.source.file == "systems/data/b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
