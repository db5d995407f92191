"""The options ``vllm serve`` knows (bundled table) and argparse's rule for matching one.

The table (``data/vllm/serve_flags.json``) was derived from vLLM's own parser sources by
``scripts/derive_vllm_serve_flags.py``; it names its vLLM version. vLLM's
FlexibleArgumentParser is an argparse parser with ``allow_abbrev`` left on, so an unambiguous
prefix of a long option is that option (``--max-model 4096`` is ``--max-model-len``), an
ambiguous one is refused, and an unknown option ends the command ("unrecognized arguments").
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from kvplan.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """vLLM's serve options: each option string and whether it takes a value."""

    vllm_version: str
    takes_value: dict[str, bool]


@cache
def serve_options() -> ServeOptions:
    """The bundled table of ``vllm serve`` options."""
    text = resources.files("kvplan").joinpath("data", "vllm", "serve_flags.json").read_text(
        "utf-8")
    data = json.loads(text)
    return ServeOptions(vllm_version=data["vllm_version"],
                        takes_value={k: v["takes_value"] for k, v in data["flags"].items()})


def _base(flag: str) -> str:
    """``--compilation-config.level`` -> ``--compilation-config``; ``-O3`` / ``-O.level`` -> -O
    (vLLM's dotted JSON keys and its -O<level> shorthand)."""
    if flag.startswith("--") and "." in flag:
        return flag.split(".", 1)[0]
    if flag.startswith("-O") and not flag.startswith("--"):
        return "-O"
    return flag


def _prefix_matches(flag: str, known: list[str]) -> list[str]:
    """argparse's abbreviation candidates (Python 3.12 _get_option_tuples); ``--`` alone
    ends the options and abbreviates nothing."""
    if flag == "--":
        return []
    if flag.startswith("--"):
        return [k for k in known if k.startswith("--") and k.startswith(flag)]
    return [k for k in known if not k.startswith("--")
            and (k == flag[:2] or k.startswith(flag))]


def vllm_option(flag: str) -> str:
    """The option vLLM's parser takes ``flag`` for (exact, or an unambiguous prefix), with
    underscores already dashes; an unknown or ambiguous option is refused as vLLM refuses it."""
    table = serve_options()
    base = _base(flag)
    if base in table.takes_value:
        return base
    matches = _prefix_matches(base, list(table.takes_value))
    if len(matches) == 1:
        return matches[0]
    version = table.vllm_version
    if matches:
        shown = ", ".join(sorted(matches)[:6]) + (", ..." if len(matches) > 6 else "")
        raise InputError(f"vllm serve refuses {flag}: ambiguous option (vLLM {version}: "
                         f"could match {shown}); write the option in full")
    near = difflib.get_close_matches(base[:100], list(table.takes_value), n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]}?" if near else "; see vllm serve --help"
    if base in KVPLAN_OWN:  # kvplan's option typed after the pasted line
        hint = f"; {base} is kvplan's own option: give it before the --"
    raise InputError(f"vllm serve refuses {flag}: unrecognized argument (vLLM {version})"
                     f"{hint}")


KVPLAN_OWN = frozenset({
    "--json", "--plot", "--profile", "--prompt", "--output", "--batch", "--sweep", "--explain",
    "--expert-imbalance", "--all2all-backend", "--mxfp4-moe-backend", "--dataset",
    "--num-prompts", "--request-rate", "--burstiness", "--time-scale", "--max-concurrency",
    "--random-input-len", "--random-output-len", "--random-prefix-len", "--random-range-ratio",
    "--trace", "--trace-columns", "--goodput", "--percentile-metrics", "--metric-percentiles",
    "--save-result", "--save-detailed", "--disagg", "--router", "--kv-link", "--prefill-gpu",
    "--prefill-tp", "--prefill-dp", "--prefill-instances", "--decode-gpu", "--decode-tp",
    "--decode-dp", "--decode-instances"})
"""Options of kvplan's capacity, latency and simulate that ``vllm serve`` does not know: one
typed after the pasted line is refused (as vLLM refuses it) with a hint to move it before
the ``--``, not vLLM's nearest option (``--json``: "did you mean --revision?")."""


LIST_OPTIONS = frozenset({
    "--api-key", "--lora-modules", "--allowed-media-domains", "--served-model-name",
    "--logits-processors", "--ignore-patterns", "--collect-detailed-traces",
    "--cuda-graph-sizes"})
"""Options that take one or more words (``nargs='+'``): vLLM 0.11's ``get_kwargs`` gives every
list-typed field ``nargs="+"`` (``engine/arg_utils.py``); FrontendArgs' allowed_origins,
allowed_methods, allowed_headers and middleware have theirs removed (``cli_args.py``)."""
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def is_option(word: str) -> bool:
    """Whether argparse reads ``word`` as an option, not a value: it starts with ``-``, is not
    ``-`` alone, and is not a negative number (vLLM's parser has no option that looks like
    one, so ``-tp -1`` gives -tp the value -1)."""
    return word.startswith("-") and word != "-" and not _NEGATIVE_NUMBER.match(word)


def takes_value(option: str) -> bool:
    """Whether vLLM reads the next word as ``option``'s value (False for switches)."""
    return serve_options().takes_value.get(option, True)


_KV_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
_QUANTIZATIONS = (
    "awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "modelopt",
    "modelopt_fp4", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin", "gptq_bitblas",
    "awq_marlin", "gptq", "compressed-tensors", "bitsandbytes", "hqq", "experts_int8", "ipex",
    "quark", "moe_wna16", "torchao", "auto-round", "rtn", "inc", "mxfp4", "petit_nvfp4")
CHOICES: dict[str, tuple[str, ...]] = {
    "--kv-cache-dtype": _KV_DTYPES, "--quantization": _QUANTIZATIONS, "-q": _QUANTIZATIONS,
    "--dtype": ("auto", "half", "float16", "bfloat16", "float", "float32"),
    "--block-size": ("1", "8", "16", "32", "64", "128"),
}
"""argparse ``choices`` of the options kvplan reads, vLLM 0.11.0 (``get_kwargs`` turns a
Literal field into choices): config/cache.py CacheDType and BlockSize (an int: ``016`` is 16),
config/model.py ModelDType, model_executor/layers/quantization QuantizationMethods."""
HUMAN_INT = ("--max-model-len", "--max-num-batched-tokens", "--kv-cache-memory-bytes")
"""Options vLLM 0.11 reads with its ``human_readable_int`` (engine/arg_utils.py)."""
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def check_value(option: str, value: str) -> None:
    """Refuse a value vLLM 0.11's argparse refuses for ``option`` ("invalid choice", or not a
    ``human_readable_int``: ``1.5G``, ``24GiB``, ``1t``), naming the values it takes."""
    version = serve_options().vllm_version
    choices = CHOICES.get(option)
    if choices is not None and _choice(option, value) not in choices:
        raise InputError(f"vllm serve refuses {option} {value}: invalid choice (vLLM "
                         f"{version}: {', '.join(choices)}); kvplan's own {option} (before --) "
                         "also takes kvplan's what-if values")
    if option in HUMAN_INT and not _human_readable_int(value):
        raise InputError(f"vllm serve refuses {option} {value}: invalid human_readable_int "
                         f"value (vLLM {version} reads 8192, 8k = 8,000, 8K = 8,192, 1.5m; "
                         "no decimals with K/M/G, no T, no GiB / GB)")


def _choice(option: str, value: str) -> str:
    if option != "--block-size":
        return value
    try:
        return str(int(value))
    except ValueError:
        return value


def _human_readable_int(value: str) -> bool:
    """Whether vLLM 0.11's ``human_readable_int`` reads ``value``: a number with k/m/g
    (decimals allowed) or K/M/G (whole), else Python's ``int`` (``t``/``T`` match its pattern
    but have no multiplier, so they fall through to ``int`` and fail)."""
    text = value.strip()
    match = _HUMAN.fullmatch(text)
    if match is not None and match.group(2) in "kmgKMG":
        return match.group(2) in "kmg" or "." not in match.group(1)
    try:
        int(text)
    except ValueError:
        return False
    return True
