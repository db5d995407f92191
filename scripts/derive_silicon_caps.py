"""The last step of deriving the silicon bundle: a GPU that is a measured GPU's die with at
least its bandwidth, clocks and links is never slower than it (numpy only, so the step can be
rerun on a bundle without the wheel: ``python scripts/derive_silicon_caps.py GB200``).

docs/silicon.md, "How the bundle is derived", step 5.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "src" / "kvplan" / "data" / "silicon"
CAPS = {
    # H200: H100's GH100 die and clocks, 4.8 against 3.35 TB/s
    "H200-SXM-141GB": ("H100-SXM-80GB", "h100"),
    # GB200: B200's Blackwell die and 8 TB/s HBM3e, NVLink 5 alike, at 1,200 W against
    # 1,000 W (2.5 against 2.25 PF dense bf16)
    "GB200": ("B200-SXM-180GB", "b200"),
}
"""GPU -> (the measured GPU it may never be slower than, the manifest's tag for it)."""


def cap_at_reference(arrays: dict[str, dict[str, np.ndarray]], manifest: dict[str, Any],
                     gpu: str, families: list[str]) -> None:
    """Where a cell of ``gpu`` exceeds its reference's for the same key and axes (another
    machine's noise, or a slower measurement setup), take the reference's; count the cells
    and the largest excess per family in the manifest (``capped_at_<tag>_cells``, ...)."""
    ref, tag = CAPS[gpu]
    mine, theirs = arrays[gpu], arrays[ref]
    manifest["gpus"][gpu]["capped_at"] = ref
    for name in families:
        if f"{name}.logt" not in mine or f"{name}.logt" not in theirs:
            continue
        axes = sum(1 for k in mine if k.startswith(f"{name}.axis"))
        same_axes = all(np.array_equal(mine[f"{name}.axis{i}"], theirs[f"{name}.axis{i}"])
                        for i in range(axes))
        capped, worst = _cap_family(mine, theirs, name) if same_axes else (0, 1.0)
        entry = manifest["gpus"][gpu]["tables"][name]
        entry[f"capped_at_{tag}_cells"] = capped
        entry[f"capped_at_{tag}_max_ratio"] = round(worst, 4)
        entry[f"{tag}_axes_match"] = same_axes


def _cap_family(mine: dict[str, np.ndarray], theirs: dict[str, np.ndarray], name: str
                ) -> tuple[int, float]:
    index = {tuple(r): i for i, r in enumerate(theirs[f"{name}.keys"].tolist())}
    capped, worst = 0, 1.0
    logt = mine[f"{name}.logt"]
    for j, row in enumerate(mine[f"{name}.keys"].tolist()):
        i = index.get(tuple(row))
        if i is None:
            continue
        a, b = logt[j], theirs[f"{name}.logt"][i]
        over = a > b
        capped += int(over.sum())
        if over.any():
            worst = max(worst, float(np.exp((a - b)[over].max())))
        logt[j] = np.minimum(a, b)
    return capped, worst


def main(argv: list[str]) -> int:
    """Cap one bundled GPU (not yet capped) at its reference in place: its .npz and the
    manifest's counts and size. A rerun would count 0 cells: run it on a fresh derivation."""
    (gpu,) = argv
    manifest = json.loads((OUT / "manifest.json").read_text())
    if "capped_at" in manifest["gpus"][gpu]:
        print(f"error: {gpu} is already capped at {manifest['gpus'][gpu]['capped_at']}",
              file=sys.stderr)
        return 2
    arrays = {g: _load(g) for g in (gpu, CAPS[gpu][0])}
    cap_at_reference(arrays, manifest, gpu, list(manifest["families"]))
    np.savez_compressed(OUT / f"{gpu}.npz", **arrays[gpu])
    manifest["gpus"][gpu]["bytes"] = (OUT / f"{gpu}.npz").stat().st_size
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


def _load(gpu: str) -> dict[str, np.ndarray]:
    with np.load(OUT / f"{gpu}.npz") as npz:
        return {name: np.array(npz[name]) for name in npz.files}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
