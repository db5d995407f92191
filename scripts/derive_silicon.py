"""Derive kvplan's bundled silicon tables from NVIDIA's aiconfigurator-core wheel.

    pip download --no-deps -d /tmp/aic aiconfigurator-core==0.12.0
    cd /tmp/aic && mkdir -p x && cd x && unzip -q ../aiconfigurator_core-0.12.0-*.whl
    .venv/bin/pip install -e '.[derive]'        # pandas + pyarrow: this script only
    .venv/bin/python scripts/derive_silicon.py --source /tmp/aic/x/aiconfigurator_core

Writes src/kvplan/data/silicon/<GPU>.npz (numpy-only: dense log-latency grids) and
manifest.json (source package and version, per-table engine + version + kernels, what was
kept, filled, lowered, raised, capped and dropped), plus the Apache-2.0 notice. The same wheel
gives the same arrays and manifest (only the npz members' zip timestamps differ). What each
step does and why: docs/silicon.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from derive_silicon_caps import CAPS, cap_at_reference
from derive_silicon_tables import FAMILIES, Family, build_family
from packaging.version import Version

PACKAGE, PACKAGE_VERSION = "aiconfigurator-core", "0.12.0"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "kvplan" / "data" / "silicon"
GPUS = {  # aiconfigurator system -> kvplan catalog id
    "a100_sxm": "A100-80GB-SXM",
    "h100_sxm": "H100-SXM-80GB",
    "h200_sxm": "H200-SXM-141GB",
    "b200_sxm": "B200-SXM-180GB",
    "gb200": "GB200",
    "l40s": "L40S",
}
NOTICE = """\
The tables in this folder are derived from aiconfigurator-core {version} (NVIDIA's
AIConfigurator, https://github.com/ai-dynamo/aiconfigurator, files
aiconfigurator_core/systems/data/**/*.parquet).
Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
Licensed under the Apache License, Version 2.0 (SPDX-License-Identifier: Apache-2.0); the
license text is LICENSE-Apache-2.0.txt in this folder.
Modifications by kvplan (scripts/derive_silicon.py): rows restricted to the op families and
dtypes kvplan's step model prices; latencies converted from milliseconds to log(seconds) on
dense grids; holes filled by roofline extrapolation from the nearest measured edge; each grid
made non-decreasing along its size axes; raised to the datasheet roofline floor where a point
ran above it; H200 cells capped at H100's and GB200 cells at B200's for the same shape.
manifest.json counts each.
"""


def pick_table(system_dir: Path, family: Family) -> tuple[str, str, Path] | None:
    """The newest vLLM version holding the family's file; else SGLang's, else TRT-LLM's."""
    for engine in family.engines:
        base = system_dir / family.folder / engine
        versions = sorted(
            (d.name for d in base.glob("*") if (d / family.filename).exists()),
            key=_version_key, reverse=True,
        )
        if versions:
            return engine, versions[0], base / versions[0] / family.filename
    return None


def _version_key(text: str) -> Version:
    try:
        return Version(text)
    except ValueError:
        return Version("0")


def gpu_peaks(system: str, kvplan_id: str, source: Path) -> dict[str, Any]:
    """Datasheet figures the floors use: kvplan's GPU catalog, else aiconfigurator's yaml."""
    from kvplan.specs.hardware import gpu_catalog

    spec = gpu_catalog().get(kvplan_id.lower())
    if spec is not None:
        return {
            "bfloat16": spec.peak_flops_for("bfloat16"),
            "fp8": spec.peak_flops.get("fp8", 0.0),
            "fp4": spec.peak_flops.get("fp4", 0.0),
            "mem_bw": spec.mem_bw_bytes_per_s,
            "link_bw": spec.interconnect_bytes_per_s / 2.0,
            "source": f"kvplan catalog ({spec.id})",
        }
    doc = yaml.safe_load((source / "systems" / f"{system}.yaml").read_text())
    gpu, node = doc["gpu"], doc["node"]
    return {
        "bfloat16": float(gpu["bfloat16_tc_flops"]),
        "fp8": float(gpu.get("fp8_tc_flops", 0.0)),
        "fp4": float(gpu.get("fp4_tc_flops", 0.0)),
        "mem_bw": float(gpu["mem_bw"]),
        "link_bw": float(node["intra_node_bw"]),
        "source": f"aiconfigurator systems/{system}.yaml (not in kvplan's catalog)",
    }


def derive_gpu(system: str, source: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every family's grids for one GPU, and its manifest entry."""
    kvplan_id = GPUS[system]
    peaks = gpu_peaks(system, kvplan_id, source)
    arrays: dict[str, np.ndarray] = {}
    tables: dict[str, Any] = {}
    for family in FAMILIES:
        picked = pick_table(source / "systems" / "data" / system, family)
        if picked is None:
            tables[family.name] = {"absent": True}
            continue
        engine, version, path = picked
        frame = pd.read_parquet(path)
        grids, meta = build_family(family, frame, peaks)
        arrays.update({f"{family.name}.{k}": v for k, v in grids.items()})
        rel = path.relative_to(source).as_posix()
        tables[family.name] = {"engine": engine, "version": version, "file": rel,
                               "fallback_engine": engine not in ("vllm", "nccl"), **meta}
    entry = {"aic_system": system, "device": _device(source, system), "peaks": peaks,
             "tables": tables}
    return arrays, entry


def _device(source: Path, system: str) -> str:
    frame = pd.read_parquet(next((source / "systems" / "data" / system).rglob("gemm_perf.parquet")))
    return str(frame["device"].iloc[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=Path("/tmp/aic/x/aiconfigurator_core"))
    parser.add_argument("--license", type=Path, default=None,
                        help="an Apache-2.0 license text to ship (default: packaging's)")
    args = parser.parse_args(argv)
    if not (args.source / "systems" / "data").is_dir():
        print(f"error: {args.source} has no systems/data; unzip the {PACKAGE} wheel there",
              file=sys.stderr)
        return 2
    arrays: dict[str, dict[str, np.ndarray]] = {}
    manifest: dict[str, Any] = {"source": {"package": PACKAGE, "version": PACKAGE_VERSION,
                                           "license": "Apache-2.0", "notice": "NOTICE"},
                                "dropped": DROPPED, "gpus": {}}
    for system, kvplan_id in GPUS.items():
        arrays[kvplan_id], manifest["gpus"][kvplan_id] = derive_gpu(system, args.source)
    manifest["families"] = {f.name: f.describe() for f in FAMILIES}
    for gpu in CAPS:  # H200 at H100, GB200 at B200: the same die, never slower
        cap_at_reference(arrays, manifest, gpu, [f.name for f in FAMILIES])
    write(arrays, manifest, args.license)
    return 0


def write(arrays: dict[str, dict[str, np.ndarray]], manifest: dict[str, Any],
          license_path: Path | None) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for kvplan_id, grids in arrays.items():
        np.savez_compressed(OUT / f"{kvplan_id}.npz", **grids)
        manifest["gpus"][kvplan_id]["bytes"] = (OUT / f"{kvplan_id}.npz").stat().st_size
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (OUT / "NOTICE").write_text(NOTICE.format(version=PACKAGE_VERSION))
    shutil.copyfile(license_path or _apache_text(), OUT / "LICENSE-Apache-2.0.txt")


def _apache_text() -> Path:
    import packaging

    found = list(Path(packaging.__file__).parent.parent.glob("packaging-*/**/LICENSE.APACHE"))
    if not found:
        raise SystemExit("error: no Apache-2.0 license text found; pass --license FILE")
    return found[0]


DROPPED = [
    "SGLang and TensorRT-LLM tables wherever a vLLM table of the family exists",
    "older vLLM versions of a family (the newest is kept)",
    "encoder_attention, linear_attention's mamba2_perf (TensorRT-LLM only), kda, mhc, msa, "
    "sparse_attention (DSA, DeepSeek-V4), quantize, mla_bmm, wideep_*, moe_a2a, dsv4_megamoe: "
    "not priced by kvplan's step model yet",
    "MoE rows with power-law routing where balanced rows exist (the step model prices the "
    "expected distinct experts itself)",
    "NCCL int8 rows; attention rows with attn_dtype other than bfloat16 or beam_width > 1",
]

if __name__ == "__main__":
    raise SystemExit(main())
