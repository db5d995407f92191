"""A pasted ``vllm serve MODEL --flag value ...`` line -> engine settings and ignored flags,
read with the same flag table (``cli/flags.py``) as kvplan's own options."""

from __future__ import annotations

from typing import Any

from kvplan.cli.flags import BY_NAME, parse_flag

_PREFIX = ("vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server")


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
    while tokens and tokens[0] in _PREFIX:
        tokens.pop(0)
    found: dict[str, Any] = {}
    ignored: list[str] = []
    i = 0
    while i < len(tokens):
        flag, value = _split_flag(tokens[i])
        i += 1
        if not flag.startswith("-"):
            found.setdefault("model", flag)
            continue
        boolean = _bool_flag(flag)
        if boolean is not None and value is None:
            found[boolean[0]] = boolean[1]
            continue
        if value is None and i < len(tokens) and not tokens[i].startswith("-"):
            value, i = tokens[i], i + 1
        _take(flag, value, found, ignored)
    return found, ignored


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
