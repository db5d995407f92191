"""HardwareSpec (memory, bandwidth, peak FLOP/s per dtype, interconnect) and the GPU catalog."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from kvplan import input_file, jsonread
from kvplan.errors import ConfigError, KvplanError, UnknownNameError
from kvplan.units import GB

TERA = 10**12


class ReadOnlyDict(dict[str, float]):
    """A dict that refuses changes: a GPU's rates. ``load_gpu`` hands every caller the same
    cached spec, so one caller's edit would reprice every later answer in the process."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a HardwareSpec's rates are read-only; make a changed copy with "
                        "dataclasses.replace(gpu, peak_flops={**gpu.peak_flops, ...})")

    __setitem__ = __delitem__ = clear = pop = popitem = _refuse
    setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:  # unpickled whole, not item by item
        return ReadOnlyDict, (dict(self),)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """One accelerator as the datasheet describes it (decimal units, dense tensor rates)."""

    id: str
    memory_bytes: int
    """Advertised capacity (memory_gb x 10^9)."""
    mem_bw_bytes_per_s: float
    peak_flops: dict[str, float] = field(default_factory=dict)
    """Dense tensor FLOP/s by compute dtype: 'float16', 'bfloat16', 'fp8', 'int8', 'fp4';
    'float32': IEEE fp32 math (NVIDIA's CUDA-core FP32, not TF32; AMD's FP32 matrix)."""
    interconnect: str = ""
    interconnect_bytes_per_s: float = 0.0
    """Per-GPU scale-up bandwidth as the vendor quotes it (NVLink: total bidirectional)."""
    bridge_gpus: int = 0
    """GPUs an NVLink bridge joins (2 on H100 PCIe, RTX 3090); 0 = the link joins the node."""
    pcie_bytes_per_s: float = 0.0
    """PCIe x16 bandwidth (bidirectional) a TP group wider than a bridge all-reduces over."""
    mesh_links: int = 0
    """Direct GPU-to-GPU links the interconnect figure sums, with no switch (MI300X: 7 x 128
    GB/s in an 8-GPU mesh): a TP group of k GPUs reaches its peers over k - 1 of them."""
    vendor: str = ""
    node_gpus: int = 0
    """GPUs one node joins over the scale-up link (NVLink); 0 = not given (8 assumed)."""
    scale_out_bytes_per_s: float = 0.0
    """Per-GPU inter-node bandwidth, one direction (e.g. one 400 Gb/s NIC = 50 GB/s);
    0 = unknown, and then kvplan refuses deployments spanning nodes."""
    arch: str = ""
    """Architecture as gpus.json names it ("Hopper (GH100)", "Blackwell", "CDNA 3"): picks
    vLLM's kernel backends where they change memory (``kvplan.costs.memory.mxfp4_layout``)."""
    kernels_of: str = ""
    """A measured GPU with the same die, clocks and HBM (H800 -> H100 SXM): its kernel tables
    price this one, collectives scaled to this GPU's own interconnect; "" = none."""
    achievable: dict[str, float] = field(default_factory=dict)
    """The best rates a public benchmark measured on this GPU: FLOP/s by compute dtype
    ('float16', 'bfloat16', 'fp8') and 'mem_bw' in bytes/s. The roofline of a GPU without
    kernel tables never runs above them (``kvplan.costs.kernels.donor``); empty = none."""
    achievable_source: str = ""
    source: str = ""

    def __post_init__(self) -> None:  # frozen all the way down (ReadOnlyDict)
        for name in ("peak_flops", "achievable"):
            object.__setattr__(self, name, ReadOnlyDict(getattr(self, name)))

    def tp_link_bytes_per_s(self, tp: int) -> float:
        """The scale-up bandwidth (bidirectional) a TP group of ``tp`` GPUs all-reduces over:
        the vendor's figure through a switch; PCIe where the group is wider than one NVLink
        bridge's pair; in a switchless mesh, the tp - 1 direct links to the group's peers
        (one at TP1, where only a pipeline hop crosses the link)."""
        if self.bridge_gpus and tp > self.bridge_gpus and self.pcie_bytes_per_s:
            return self.pcie_bytes_per_s
        if self.mesh_links and tp <= self.mesh_links:  # tp 1: a PP hop's one link
            return self.interconnect_bytes_per_s * max(1, tp - 1) / self.mesh_links
        return self.interconnect_bytes_per_s

    def peak_flops_for(self, dtype: str) -> float:
        """Peak dense FLOP/s for a compute dtype; falls back to fp16/bf16 when unsupported
        (weights the GPU cannot multiply at their width run 16-bit), except float32: 0.0
        where the GPU gives no fp32 rate (fp32 math never runs at a 16-bit rate)."""
        rate = self.peak_flops.get(dtype)
        if rate or dtype == "float32":
            return rate or 0.0
        return self.peak_flops.get("bfloat16") or self.peak_flops.get("float16") or 0.0


_ALIASES = {
    "h100": "H100-SXM-80GB",
    "h100-sxm": "H100-SXM-80GB",
    "h100-80gb": "H100-SXM-80GB",
    "h100-pcie": "H100-PCIe-80GB",
    "h200": "H200-SXM-141GB",
    "h800": "H800-SXM-80GB",
    "h800-sxm": "H800-SXM-80GB",
    "h800-80gb-hbm3": "H800-SXM-80GB",
    "b200": "B200-SXM-180GB",
    "gb200-nvl72": "GB200",
    "gb200-nvl": "GB200",
    "gb200-186gb": "GB200",
    "a100": "A100-80GB-SXM",
    "a100-80gb": "A100-80GB-SXM",
    "a100-40gb": "A100-40GB-SXM",
    "4090": "RTX-4090",
    "rtx4090": "RTX-4090",
    "l40s": "L40S",
    "l4": "L4",
    "a10g": "A10G",
    "mi300x": "MI300X",
    "mi325x": "MI325X",
    "tpu-v5e": "TPU-v5e",
    # names as nvidia-smi / torch print them ("NVIDIA H100 80GB HBM3" -> h100-80gb-hbm3)
    "h100-sxm5-80gb": "H100-SXM-80GB",
    "h100-80gb-hbm3": "H100-SXM-80GB",
    "a100-sxm4-80gb": "A100-80GB-SXM",
    "a100-sxm4-40gb": "A100-40GB-SXM",
    "h200-141gb": "H200-SXM-141GB",
    "geforce-rtx-4090": "RTX-4090",
    "3090": "RTX-3090",
    "rtx3090": "RTX-3090",
    "geforce-rtx-3090": "RTX-3090",
    "mi300": "MI300X",
    # ROCm's torch.cuda.get_device_name() ("AMD Instinct MI300X")
    "amd-instinct-mi300x": "MI300X",
    "amd-instinct-mi325x": "MI325X",
}


def hardware_from_dict(entry: dict[str, Any], *, file: str = "gpus.json") -> HardwareSpec:
    """One gpus.json-style entry -> HardwareSpec; ConfigError names a missing field."""
    for key in ("id", "memory_gb", "mem_bw_tbps"):
        if entry.get(key) is None:
            raise ConfigError("is required for a GPU description", field=key, file=file)
    _check_gpu_numbers(entry, file)
    rates = {
        "float16": entry.get("fp16_tflops_dense"),
        "bfloat16": entry.get("bf16_tflops_dense"),
        "fp8": entry.get("fp8_tflops_dense"),
        "int8": entry.get("int8_tops_dense"),
        "fp4": entry.get("fp4_tflops_dense"),
        "float32": entry.get("fp32_tflops_dense"),
    }
    achieved = _achievable(entry.get("achievable"), rates, entry["mem_bw_tbps"], file)
    try:
        return HardwareSpec(
            id=str(entry["id"]),
            memory_bytes=int(float(entry["memory_gb"]) * GB),
            mem_bw_bytes_per_s=float(entry["mem_bw_tbps"]) * TERA,
            peak_flops={k: float(v) * TERA for k, v in rates.items() if v},
            interconnect=str(entry.get("interconnect", "")),
            interconnect_bytes_per_s=float(entry.get("interconnect_gbps") or 0) * GB,
            bridge_gpus=int(entry.get("bridge_gpus") or 0),
            pcie_bytes_per_s=float(entry.get("pcie_gbps") or 0) * GB,
            mesh_links=int(entry.get("mesh_links") or 0),
            vendor=str(entry.get("vendor", "")),
            node_gpus=int(entry.get("node_gpus") or 0),
            scale_out_bytes_per_s=float(entry.get("scale_out_gbps") or 0) * GB,
            arch=str(entry.get("arch", "")),
            kernels_of=str(entry.get("kernels_of") or ""),
            achievable=achieved,
            achievable_source=str((entry.get("achievable") or {}).get("source", "")),
            source=str(entry.get("source", "")),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"has a non-numeric value ({exc})", file=file) from None


_ACHIEVABLE = {"fp16_tflops": "float16", "bf16_tflops": "bfloat16", "fp8_tflops": "fp8",
               "mem_bw_tbps": "mem_bw"}
"""Keys of a GPU's ``achievable`` block (TFLOP/s, TB/s) and the rate each bounds."""


def _achievable(block: Any, rates: dict[str, Any], mem_bw: Any, file: str) -> dict[str, float]:
    """The ``achievable`` block -> {rate: per second}; each a number no higher than the
    datasheet's own figure (a measurement cannot beat the peak it is measured against)."""
    from kvplan.limits import check_number

    if block is None:
        return {}
    if not isinstance(block, dict) or set(block) - {*_ACHIEVABLE, "source"}:
        raise ConfigError("must map some of " + ", ".join(_ACHIEVABLE) + " (measured TFLOP/s, "
                          "TB/s) and 'source' to values", field="achievable", file=file)
    peaks = {**rates, "mem_bw": mem_bw}
    out: dict[str, float] = {}
    for key, rate in _ACHIEVABLE.items():
        if block.get(key) is None:
            continue
        try:
            value = check_number(key, _number_text(block[key]), 0.001, 100_000.0)
            peak = float(_number_text(peaks.get(rate) or 0))
        except (KvplanError, TypeError, ValueError) as exc:
            raise ConfigError(str(exc), field=f"achievable.{key}", file=file) from None
        if peak and value > peak:
            raise ConfigError(f"{value:g} is above the datasheet's {peak:g}: a measured rate "
                              "cannot beat its peak", field=f"achievable.{key}", file=file)
        out[rate] = value * TERA
    return out


def _check_gpu_numbers(entry: dict[str, Any], file: str) -> None:
    """Each numeric field finite and within ``kvplan.limits.GPU_RANGES`` (no real GPU is
    outside them; NaN, infinities and negatives would reach every latency)."""
    from kvplan.limits import GPU_RANGES, check_number

    for key, (low, high) in GPU_RANGES.items():
        value = entry.get(key)
        if value is None or (key != "memory_gb" and key != "mem_bw_tbps" and value == 0):
            continue  # absent (0 = "not supported" for the optional rates)
        try:
            check_number(key, _number_text(value), low, high)
        except KvplanError as exc:
            raise ConfigError(str(exc), field=key, file=file) from None
    for key in ("node_gpus", "bridge_gpus", "mesh_links"):
        if entry.get(key) and float(_number_text(entry[key])) % 1:
            raise ConfigError("must be a whole number of GPUs", field=key, file=file)
    for key in ("id", "arch", "interconnect", "vendor", "source"):
        if isinstance(entry.get(key), (list, dict, bool)) or entry.get(key) == "":
            raise ConfigError("must be a name (text)", field=key, file=file)


def _number_text(value: Any) -> Any:
    """YAML reads '1e-300' (no dot) as a string; accept numbers written as text."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


@cache
def gpu_catalog() -> dict[str, HardwareSpec]:
    """Catalog id (lower-case) -> HardwareSpec, from the bundled gpus.json."""
    path = input_file.package_file("specs", "catalog", "gpus", "gpus.json")
    data = jsonread.loads(input_file.read_text(path))
    return {g["id"].lower(): hardware_from_dict(g) for g in data["gpus"]}


def load_gpu(name_or_path: str | os.PathLike[str]) -> HardwareSpec:
    """A catalog id or alias (case-insensitive) or a YAML/JSON file describing one GPU (a str
    or a path object)."""
    name_or_path = os.fspath(name_or_path)
    try:
        path = Path(name_or_path).expanduser()
    except RuntimeError:  # '~user' with no such user: the name as typed
        path = Path(name_or_path)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        return _load_gpu_file(path)
    found = _from_catalog(name_or_path)
    if found is None:
        known = ", ".join(g.id for g in gpu_catalog().values())
        near = nearest_gpus(name_or_path)
        hint = f" (nearest: {', '.join(near)})" if near else ""
        raise UnknownNameError(
            f"unknown GPU {name_or_path!r}{hint}: choose one of {known}, or pass a YAML/JSON "
            "file with id, memory_gb, mem_bw_tbps, bf16_tflops_dense"
        )
    return found


def _key(name: str) -> str:
    return "-".join(name.strip().lower().replace("nvidia", "").split())


def _from_catalog(name: str) -> HardwareSpec | None:
    key = _key(name)
    return gpu_catalog().get(_ALIASES.get(key, key).lower())


def nearest_gpus(name: str, n: int = 3) -> list[str]:
    """Catalog ids closest to a mistyped GPU name, by id or alias ('H20' -> H200's)."""
    import difflib

    catalog = gpu_catalog()
    by_key = {k: catalog[v.lower()].id for k, v in _ALIASES.items()} | {
        key: g.id for key, g in catalog.items()}
    close = difflib.get_close_matches(_key(name)[:200], list(by_key), n=2 * n, cutoff=0.6)
    return list(dict.fromkeys(by_key[c] for c in close))[:n]


def catalog_id(name: str) -> str | None:
    """The catalog's id for a GPU id or alias ('h100' -> 'H100-SXM-80GB'); None if none."""
    found = _from_catalog(name)
    return found.id if found is not None else None


def _load_gpu_file(path: Path) -> HardwareSpec:
    import yaml

    try:
        data = yaml.safe_load(input_file.read_text(path))
    except OSError as exc:
        raise ConfigError(f"cannot read GPU description ({input_file.reason(exc)})",
                          file=str(path)) from None
    except (RecursionError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"cannot read GPU description ({exc.__class__.__name__})", file=str(path)
        ) from None
    except ValueError as exc:  # an integer of more than 4,300 digits (int() refuses it)
        raise ConfigError(f"cannot read GPU description ({' '.join(str(exc).split()[:6])})",
                          file=str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError("must hold a mapping with id, memory_gb, mem_bw_tbps", file=str(path))
    if data.get("kernels_of"):
        raise ConfigError("is read from the bundled catalog only (a GPU described in a file "
                          "is priced by the roofline): drop it", field="kernels_of",
                          file=str(path))
    spec = hardware_from_dict(data, file=str(path))
    named = _from_catalog(spec.id)
    if named is not None:  # tables, CUDA totals, profiles and prices are keyed by the id
        raise ConfigError(f"{spec.id!r} names the catalog GPU {named.id}, whose measured kernels "
                          "and CUDA total would price it instead of this file's figures: give "
                          f"this GPU its own id, or pass --gpu {named.id}", field="id",
                          file=str(path))
    return spec
