"""Profile sets: efficiency profiles keyed by GPU and precision, read, written and bundled."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from kvplan import input_file, jsonread
from kvplan.atomic_file import atomic_write
from kvplan.costs.step.constants import compute_precision
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.profile_checks import (
    canonical_entry,
    check_profile_entry,
    check_unique,
    profile_entries,
)
from kvplan.errors import ConfigError, KvplanError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

PROFILE_SCHEMA = "kvplan-profile/1"
_16BIT = frozenset({"float16", "bfloat16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileSet:
    """Profiles keyed by (GPU id, compute precision), with a fallback for anything else."""

    profiles: tuple[Profile, ...] = ()
    default: Profile = field(default_factory=Profile)
    fitted_on: str = ""

    def pick(self, gpu_id: str, precision: str) -> Profile:
        """The profile for a GPU at a compute precision, by the first rule that matches:

        1. exact (GPU, precision);
        2. the same GPU at the other 16-bit type (fp16 and bf16 run the same tensor cores);
        3. the same GPU fitted at another precision: its hardware factors (bandwidth_eff,
           comm_eff, the overheads) with the default compute_eff, since the GEMM efficiency
           belongs to the precision's kernels, not to the GPU (16-bit fits preferred);
        4. the default.
        """
        gpu = gpu_id.lower()
        same_gpu = [p for p in self.profiles if p.gpu.lower() == gpu]
        for p in same_gpu:
            if p.precision == precision:
                return p
        for p in same_gpu:
            if {p.precision, precision} <= _16BIT:
                return p
        if not same_gpu:
            return self.default
        donor = min(same_gpu, key=lambda p: (p.precision not in _16BIT, p.precision))
        return replace(donor, precision=precision, compute_eff=self.default.compute_eff)


def profiles_to_dict(ps: ProfileSet) -> dict[str, Any]:
    """JSON-ready form of a profile set (what ``kvplan calibrate --out`` writes)."""
    return {"schema": PROFILE_SCHEMA, "fitted_on": ps.fitted_on,
            "default": asdict(ps.default), "profiles": [asdict(p) for p in ps.profiles]}


def profiles_from_dict(data: Any, *, file: str) -> ProfileSet:
    """Parse a profile JSON object; ConfigError names the file and the bad entry."""
    if not isinstance(data, Mapping) or data.get("schema") != PROFILE_SCHEMA:
        raise ConfigError(f"is not a kvplan profile (expected schema {PROFILE_SCHEMA!r}); "
                          "write one with 'kvplan calibrate ... --out FILE'", file=file)
    names = {f.name for f in fields(Profile)}

    def one(entry: Any, where: str) -> Profile:
        if not isinstance(entry, Mapping) or set(entry) - names:
            raise ConfigError(f"{where} must be an object with keys {sorted(names)}", file=file)
        check_profile_entry(entry, where, file)
        entry = canonical_entry(entry, where, file)
        try:
            return Profile(**entry)
        except (TypeError, KvplanError) as exc:
            raise ConfigError(f"{where}: {exc}", file=file) from None

    profiles = tuple(one(e, f"profiles[{i}]") for i, e in enumerate(profile_entries(data, file)))
    check_unique(profiles, file)
    return ProfileSet(profiles=profiles,
                      default=one(data.get("default") or {}, "default"),
                      fitted_on=str(data.get("fitted_on", "")))


def load_profiles(path: str | Path) -> ProfileSet:
    """Read a profile file written by ``kvplan calibrate --out``."""
    if not str(path).strip():  # an unset shell variable: not "the bundled profile"
        raise ConfigError("--profile is empty: give the JSON file kvplan calibrate --out "
                          "wrote, or drop --profile for the bundled profile")
    p = Path(path)
    try:
        data = jsonread.loads(input_file.read_text(p))
    except OSError as exc:
        raise ConfigError(f"cannot read the profile ({input_file.reason(exc)})",
                          file=str(p)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"is not valid JSON (line {exc.lineno}, column {exc.colno})",
                          file=str(p)) from None
    return profiles_from_dict(data, file=str(p))


def save_profiles(ps: ProfileSet, path: str | Path) -> None:
    """Write a profile set as JSON, atomically (the CLI checks the path first)."""
    text = json.dumps(profiles_to_dict(ps), indent=2, allow_nan=False) + "\n"
    atomic_write(path, text.encode("utf-8"))


@cache
def default_profiles() -> ProfileSet:
    """The bundled profile set (fitted on the public calibration set; see its fitted_on)."""
    text = input_file.read_text(input_file.package_file("data", "profiles", "default.json"))
    return profiles_from_dict(jsonread.loads(text), file="data/profiles/default.json")


def profile_for(model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                path: str | None = None, *, precision: str | None = None) -> Profile:
    """The profile for this GPU and compute precision: from the user's ``path`` where it
    covers this GPU, else the bundled set (a user profile adds to the bundled one).
    ``precision``: the deployment's resolved compute precision (None: resolved here)."""
    profiles = (merge(default_profiles(), load_profiles(path)) if path is not None
                else default_profiles())
    gpu = hardware.id
    if hardware.kernels_of and all(p.gpu.lower() != gpu.lower() for p in profiles.profiles):
        gpu = hardware.kernels_of  # H800: its twin's profile (the same die and tables)
    return profiles.pick(gpu, precision or compute_precision(model, engine))


def merge(base: ProfileSet, user: ProfileSet) -> ProfileSet:
    """``user``'s profiles over ``base``'s: a (GPU, precision) the user fitted replaces the
    bundled one, every other GPU keeps the bundled profile; the fallback stays ``base``'s."""
    mine = {(p.gpu.lower(), p.precision) for p in user.profiles}
    kept = tuple(p for p in base.profiles if (p.gpu.lower(), p.precision) not in mine)
    fitted_on = "; ".join(x for x in (user.fitted_on, f"bundled: {base.fitted_on}") if x)
    return ProfileSet(profiles=user.profiles + kept, default=base.default, fitted_on=fitted_on)
