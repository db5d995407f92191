"""A pasted ``vllm serve MODEL --flag value ...`` line -> engine settings and ignored flags,
read with the same flag table (``cli/flags.py``) as kvplan's own options; an option vLLM does
not know is refused as vLLM refuses it (``cli/vllm_options.py``). Leading ``NAME=value``
assignments (the environment of the plan's serve line, ``VLLM_ALL2ALL_BACKEND=...``) are read
too."""

from __future__ import annotations

import re
from typing import Any

from kvplan.cli.flags import BY_NAME, parse_flag
from kvplan.cli.vllm_options import takes_value, vllm_option

IGNORED_EFFECTS: dict[str, str] = {
    "--cpu-offload-gb": "weights offloaded to CPU free GPU memory for KV cache and slow every "
    "step; kvplan keeps all weights on the GPU",
    "--speculative-config": "a draft model or MTP head takes memory and each step verifies "
    "several tokens; kvplan models plain decoding",
    "--enforce-eager": "without CUDA graphs vLLM captures no graph memory and decode steps are "
    "slower; kvplan assumes CUDA graphs",
    "--compilation-config": "changes CUDA-graph capture sizes and their memory; kvplan uses "
    "vLLM's defaults",
    "-O": "changes compilation and CUDA-graph capture; kvplan uses vLLM's defaults",
    "--cuda-graph-sizes": "changes CUDA-graph memory; kvplan uses vLLM's default sizes",
    "--decode-context-parallel-size": "splits the KV cache across GPUs; kvplan does not",
    "-dcp": "splits the KV cache across GPUs; kvplan does not",
    "--enable-lora": "LoRA adapters take memory and slow steps; kvplan models none",
    "--max-loras": "LoRA adapters take memory; kvplan models none",
    "--max-lora-rank": "LoRA adapters take memory; kvplan models none",
    "--disable-sliding-window": "vLLM then caches every layer in full; kvplan keeps the windows",
    "--hf-overrides": "overrides change the model's config; edit a config.json and pass its path",
    "--rope-scaling": "changes the longest length the model takes; pass --max-model-len",
    "--limit-mm-per-prompt": "multimodal encoder cache memory is not modelled",
    "--swap-space": "CPU swap is not modelled",
}
"""Flags of a pasted ``vllm serve`` line that change memory or latency and that kvplan ignores:
each gets one ``warning:`` line saying what it changes (other ignored flags, such as --port,
are listed in one note)."""

ENV_SETTINGS = {"VLLM_ALL2ALL_BACKEND": "all2all_backend",
                "VLLM_MXFP4_USE_MARLIN": "mxfp4_moe_backend"}
"""Environment variables of a pasted line that kvplan reads (EngineConfig field); other
assignments are listed as ignored, by name."""
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")

_PREFIX = ("vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server")


def is_pasted_start(token: str) -> bool:
    """Whether a command line starts here: an environment assignment or ``vllm`` /
    ``python -m ...`` (else the word is a MODEL given before the pasted line)."""
    return bool(_ENV.fullmatch(token)) or token in _PREFIX or token.startswith("-")


def _split_flag(token: str) -> tuple[str, str | None]:
    flag, eq, value = token.partition("=")
    return flag.replace("_", "-") if flag.startswith("--") else flag, (value if eq else None)


def _bool_flag(flag: str) -> tuple[str, bool] | None:
    """``--enable-x`` -> (field, True); ``--no-enable-x`` -> (field, False); else None."""
    negated = flag.startswith("--no-")
    known = BY_NAME.get("--" + flag[5:] if negated else flag)
    if known is None or not known.is_bool:
        return None
    return known.field, not negated


def parse_vllm_command(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A pasted ``vllm serve MODEL --flag value ...`` -> (settings by field, ignored flags)."""
    tokens = list(argv)
    found: dict[str, Any] = {}
    ignored: list[str] = []
    _take_env(tokens, found, ignored)
    _check_serve_model(tokens)
    while tokens and tokens[0] in _PREFIX:
        tokens.pop(0)
    i = 0
    while i < len(tokens):
        flag, value = _split_flag(tokens[i])
        i += 1
        if not flag.startswith("-") or flag == "-":
            found.setdefault("model", flag)
            continue
        flag, value = _vllm_flag(flag, value)
        boolean = _bool_flag(flag)
        if boolean is not None and value is None:
            found[boolean[0]] = boolean[1]
            continue
        if value is None and takes_value(flag) and i < len(tokens) and tokens[i][:1] != "-":
            value, i = tokens[i], i + 1
        _take(flag, value, found, ignored)
    return found, ignored


def _take_env(tokens: list[str], found: dict[str, Any], ignored: list[str]) -> None:
    """Consume leading ``NAME=value`` assignments: ``VLLM_ALL2ALL_BACKEND`` sets the token
    exchange kvplan prices (one of its backends, else refused), ``VLLM_MXFP4_USE_MARLIN``
    (1 / 0) the MXFP4 MoE kernel; others are ignored."""
    while tokens and _ENV.fullmatch(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        field = ENV_SETTINGS.get(name)
        if field is None:
            ignored.append(name)
        else:
            found[field] = _env_value(name, value)


def _env_value(name: str, value: str) -> str:
    from kvplan.errors import InputError
    from kvplan.specs.serving import ALL2ALL_BACKENDS

    if name == "VLLM_MXFP4_USE_MARLIN":
        word = value.strip().lower()
        if word in ("1", "true", "0", "false"):
            return "marlin" if word in ("1", "true") else "auto"
        raise InputError(f"{name}={value!r}: vLLM reads 1 or 0 (Marlin MXFP4 MoE on or off)")
    if value in ALL2ALL_BACKENDS:
        return value
    raise InputError(f"{name}={value!r}: kvplan prices the token exchanges "
                     f"{', '.join(ALL2ALL_BACKENDS)}")


def _check_serve_model(tokens: list[str]) -> None:
    """``vllm serve ... --model M`` is refused by vLLM 0.11's parse_args (the API server's
    ``python -m vllm.entrypoints.openai.api_server --model M`` is not)."""
    from kvplan.errors import InputError

    if tokens[:2] == ["vllm", "serve"] and "--model" in tokens:
        raise InputError("vllm serve refuses --model: with `vllm serve`, you should provide the "
                         "model as a positional argument or in a config file instead of via "
                         "the `--model` option (vLLM 0.11.0)")


def _vllm_flag(flag: str, value: str | None) -> tuple[str, str | None]:
    """The option vLLM takes ``flag`` for; ``-O3`` carries its level (vLLM's -O shorthand)."""
    option = vllm_option(flag)
    if option == "-O" and value is None and len(flag) > 2 and flag[2] != ".":
        value = flag[2:]
    return option, value


def warn_ignored(ignored: list[str]) -> list[str]:
    """One warning line per ignored flag that changes memory or latency (printed on stderr)."""
    return [f"warning: {f} ignored: {IGNORED_EFFECTS[f]}" for f in ignored if f in IGNORED_EFFECTS]


def _take(flag: str, value: str | None, found: dict[str, Any], ignored: list[str]) -> None:
    from kvplan.errors import InputError

    if flag == "--model" and value is not None:
        found["model"] = value
        return
    known = BY_NAME.get(flag)
    if known is None:
        ignored.append(flag)
        return
    if value is None:
        raise InputError(f"{flag} needs a value")
    found[known.field] = parse_flag(known.field, value)
