"""A pasted ``vllm serve MODEL --flag value ...`` line -> engine settings and ignored flags,
read with the same flag table (``cli/flags.py``) as kvplan's own options; an option vLLM does
not know is refused as vLLM refuses it (``cli/vllm_options.py``). Leading ``NAME=value``
assignments (the environment of the plan's serve line, ``VLLM_ALL2ALL_BACKEND=...``) are read
too."""

from __future__ import annotations

import re
from typing import Any

from kvplan.cli.fast.flag_table import BY_NAME, parse_flag
from kvplan.cli.vllm_options import (
    LIST_OPTIONS,
    check_value,
    is_option,
    serve_options,
    takes_value,
    vllm_option,
)

IGNORED_EFFECTS: dict[str, str] = {
    "--cpu-offload-gb": "weights offloaded to CPU free GPU memory for KV cache and slow every "
    "step; kvplan keeps all weights on the GPU",
    "--speculative-config": "a draft model or MTP head takes memory and each step verifies "
    "several tokens; kvplan models plain decoding",
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
    "--rope-scaling": "it stretches the model's context (vLLM derives max_model_len from it); "
    "put rope_scaling in a config.json and pass its path",
    "--limit-mm-per-prompt": "kvplan prices vLLM's default limit (999 items): the vision "
    "tower and the profiling run's dummy encoder outputs stay priced (with a limit of 0 some "
    "vLLM models skip both)",
    "--swap-space": "CPU swap is not modelled",
    "--kv-transfer-config": "a KV connector takes GPU buffers, which kvplan does not model "
    "(it does model the connector turning off vLLM's hybrid KV cache manager)",
    "--enable-eplb": "with redundant experts each GPU holds extra expert copies; kvplan "
    "holds none",
    "--num-redundant-experts": "redundant expert copies take GPU memory; kvplan holds none",
    "--eplb-config": "redundant expert copies take GPU memory; kvplan holds none",
    "--hf-config-path": "the model's config is read from there; kvplan reads MODEL's config",
}
"""Flags of a pasted ``vllm serve`` line that change memory or latency and that kvplan ignores:
each gets one ``warning:`` line saying what it changes (other ignored flags, such as --port,
are listed in one note)."""

HYBRID_MANAGER_OFF = ("--disable-hybrid-kv-cache-manager", "--kv-transfer-config",
                      "--kv-events-config")
"""Flags with which vLLM 0.11 (``VllmConfig.__post_init__``) turns its hybrid KV cache manager
off: sliding-window layers beside full ones then cache every token, and a model with state
layers beside attention does not start (``specs.disagg.kv_transfer_model``). kvplan models
that; the connector's own buffers stay unmodelled (``IGNORED_EFFECTS``)."""

IGNORED_ENV_EFFECTS = {
    "VLLM_PP_LAYER_PARTITION": "it moves layers between pipeline stages, changing each stage's "
    "weights and KV blocks; kvplan splits them as vLLM's default get_pp_indices does"}
"""Environment variables of a pasted line that change memory and that kvplan ignores."""
WARNED = frozenset(IGNORED_EFFECTS) | frozenset(IGNORED_ENV_EFFECTS)
"""What ``warn_ignored`` warns about (the rest is listed in one note)."""
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


CAPACITY_SWITCHES = {"--enforce-eager": "enforce_eager"}
"""Switches of a pasted line that only ``capacity`` reads (EngineConfig field): with
--enforce-eager vLLM captures no CUDA graphs, so their memory line is 0."""


def _bool_flag(flag: str) -> tuple[str, bool] | None:
    """``--enable-x`` -> (field, True); ``--no-enable-x`` -> (field, False); else None."""
    negated = flag.startswith("--no-")
    name = "--" + flag[5:] if negated else flag
    if name in CAPACITY_SWITCHES:
        return CAPACITY_SWITCHES[name], not negated
    known = BY_NAME.get(name)
    if known is None or not known.is_bool:
        return None
    return known.field, not negated


def parse_vllm_command(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """A pasted ``vllm serve MODEL --flag value ...`` line -> (settings by field, ignored flags)."""
    tokens = list(argv)
    found: dict[str, Any] = {}
    ignored: list[str] = []
    _take_env(tokens, found, ignored)
    _check_serve_model(tokens)
    serve = tokens[:2] == ["vllm", "serve"]
    while tokens and tokens[0] in _PREFIX:
        tokens.pop(0)
    tokens = _expand_config(tokens, serve)
    i, positional = 0, 0
    while i < len(tokens):
        flag, value = _split_flag(tokens[i])
        i += 1
        if not is_option(flag):
            positional += 1
            _check_positional(tokens, i - 1, positional)
            found.setdefault("model", tokens[i - 1])
            continue
        flag, value = _vllm_flag(flag, value)
        if not takes_value(flag):
            _check_no_value(flag, value)
            boolean = _bool_flag(flag)
            if boolean is not None:
                found[boolean[0]] = boolean[1]
            else:
                ignored.append(flag)
            continue
        if value is None and i < len(tokens) and not is_option(tokens[i]):
            value, i = tokens[i], i + 1
        i = _skip_more_values(flag, tokens, i)
        _take(flag, value, found, ignored)
    return found, ignored


def _check_positional(tokens: list[str], at: int, count: int) -> None:
    """vLLM's serve parser has one positional, the model: argparse refuses a second word
    ("unrecognized arguments"), e.g. ``--enable-prefix-caching false`` or a value after a
    switch, where kvplan used to drop the word and read the switch as on."""
    from kvplan.errors import InputError

    if count == 1:
        return
    word = tokens[at]
    before = tokens[at - 1] if at > 0 else ""
    if is_option(before) and not takes_value(_vllm_flag(*_split_flag(before))[0]):
        why = f"{before} is a switch and takes no value (--no-... turns one off)"
    elif word != word.strip():
        why = "the word has spaces around it: a backslash before a space, not a line end?"
    else:
        why = "vllm serve takes one MODEL"
    raise InputError(f"vllm serve refuses {word!r}: unrecognized argument "
                     f"(vLLM {serve_options().vllm_version}); {why}")


def _check_no_value(flag: str, value: str | None) -> None:
    """argparse refuses ``--switch=value`` ("ignored explicit argument")."""
    from kvplan.errors import InputError

    if value is not None:
        raise InputError(f"vllm serve refuses {flag}={value}: ignored explicit argument "
                         f"{value!r} (vLLM {serve_options().vllm_version}: {flag} takes no "
                         "value)")


def _skip_more_values(flag: str, tokens: list[str], i: int) -> int:
    """Past the further words of a list option (``--cuda-graph-sizes 1 2 4``, nargs='+')."""
    if flag in LIST_OPTIONS:
        while i < len(tokens) and not is_option(tokens[i]):
            i += 1
    return i


def _expand_config(tokens: list[str], serve: bool) -> list[str]:
    """``--config FILE.yaml`` replaced by its settings as vLLM 0.11 inserts them
    (``FlexibleArgumentParser._pull_args_from_config``): after a leading positional MODEL,
    before the other options, so the command line's own options win."""
    from kvplan.errors import InputError

    if "--config" not in tokens:
        return tokens
    at = tokens.index("--config")
    if tokens.count("--config") > 1 or at == len(tokens) - 1:
        raise InputError("vllm serve refuses this --config: give exactly one --config FILE "
                         "(vLLM: 'More than one config file specified!' / 'No config file "
                         "specified!')")
    rest, loaded = tokens[:at] + tokens[at + 2:], _config_args(tokens[at + 1])
    model_first = bool(rest) and not rest[0].startswith("-")
    if serve and not model_first and "--model" not in loaded:
        raise InputError("vllm serve refuses this line: with --config, the MODEL must come "
                         "right after 'vllm serve' or be the file's 'model' (vLLM: 'No model "
                         "specified!')")
    if model_first and serve and "--model" in loaded:  # vllm serve: the positional wins
        cut = loaded.index("--model")
        loaded = loaded[:cut] + loaded[cut + 2:]
    head = 1 if model_first else 0
    return rest[:head] + loaded + rest[head:]


def _config_args(path: str) -> list[str]:
    """vLLM's ``load_config_file``: a flat YAML mapping -> ``--key value`` words; ``true`` is
    ``--key``, ``false`` adds nothing, a list is ``--key item ...``."""
    import yaml

    from kvplan import input_file
    from kvplan.errors import InputError

    if path.split(".")[-1] not in ("yaml", "yml"):
        raise InputError(f"--config {path}: vLLM reads a .yaml or .yml file only")
    try:
        data = yaml.safe_load(input_file.read_text(path))
    except OSError as exc:
        raise InputError(f"--config {path}: cannot read it ({input_file.reason(exc)}); kvplan "
                         "reads the file vLLM would, so it must be on this machine") from None
    except (RecursionError, ValueError, yaml.YAMLError) as exc:
        raise InputError(f"--config {path}: not YAML ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise InputError(f"--config {path}: must hold a mapping of option: value")
    out: list[str] = []
    for key, value in data.items():
        if _values_past(value, MAX_CONFIG_VALUES):
            raise InputError(f"--config {path}: option {key!r} holds more than "
                             f"{MAX_CONFIG_VALUES:,} values once YAML aliases are expanded; "
                             "vLLM's options take one value or a short list")
        if isinstance(value, bool):
            out += [f"--{key}"] if value else []
        elif isinstance(value, list):
            out += [f"--{key}", *map(str, value)] if value else []
        else:
            out += [f"--{key}", str(value)]
    return out


MAX_CONFIG_VALUES = 10_000
"""Values one --config option may hold, nested lists and YAML aliases expanded: vLLM turns
each into words with str(); nine aliases nine deep ("billion laughs", 9^9 values in a 1 KB
file) hung the command while it built the words."""


def _values_past(value: Any, cap: int) -> bool:
    """Whether VALUE holds more than CAP values, aliases counted each time they appear (the
    walk stops at CAP, so a bomb costs CAP steps)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > cap:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


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
    effects = {**IGNORED_EFFECTS, **IGNORED_ENV_EFFECTS}
    return [f"warning: {f} ignored: {effects[f]}" for f in ignored if f in effects]


def _take(flag: str, value: str | None, found: dict[str, Any], ignored: list[str]) -> None:
    from kvplan.errors import InputError

    if flag == "--model" and value is not None:
        found["model"] = value
        return
    known = BY_NAME.get(flag)
    if flag in HYBRID_MANAGER_OFF[1:]:
        _check_json_object(flag, value)
    if flag == "--max-long-partial-prefills" and value is not None and value.strip() != "1":
        # vLLM 0.11.0 _is_v1_supported_oracle, as for --max-num-partial-prefills (EngineConfig)
        raise InputError(f"--max-long-partial-prefills {value}: vLLM 0.11's V1 engine has no "
                         "concurrent partial prefills and does not start with it other than "
                         "1; drop the flag")
    if known is None:
        ignored.append(flag)
        return
    if value is None:
        raise InputError(f"{flag} needs a value")
    check_value(flag, value)
    found[known.field] = parse_flag(known.field, value)


def _check_json_object(flag: str, value: str | None) -> None:
    """vLLM 0.11 reads --kv-transfer-config / --kv-events-config as a JSON object (its
    ``parse_dataclass``): no value, bad JSON or another JSON type stops argparse, where kvplan
    used to take it as a connector and turn the hybrid KV cache manager off."""
    import json

    from kvplan.errors import InputError

    try:
        ok = value is not None and isinstance(json.loads(value), dict)
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        raise InputError(f"vllm serve refuses {flag} {value or '(no value)'}: it takes a JSON "
                         "object, e.g. '{\"kv_connector\":\"NixlConnector\",\"kv_role\":"
                         "\"kv_both\"}'")
