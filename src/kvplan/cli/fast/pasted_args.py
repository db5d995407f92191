"""A command's ``MODEL [-- vllm serve MODEL --flag ...]`` beside its own options -> one model,
engine settings and the ignored flags, read alike by every command that takes a pasted line
(cli.app.PASTED_LINE_COMMANDS; the typer-free simulate path too): the line as
``cli/pasted.py`` reads it, a setting given both ways refused, the ignored flags warned
about on stderr, the hybrid KV cache manager's off switch carried."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.cli.fast.flag_table import BY_FIELD
from kvplan.cli.pasted import (
    ENV_SETTINGS,
    HYBRID_MANAGER_OFF,
    IGNORED_EFFECTS,
    WARNED,
    is_pasted_start,
    parse_vllm_command,
    warn_ignored,
)
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.specs.model import ModelSpec

OWN_NAMES = {"all2all_backend": "--all2all-backend", "mxfp4_moe_backend": "--mxfp4-moe-backend"}
"""Settings a pasted line sets by an environment assignment, and the command's option for each."""


@dataclass(frozen=True, slots=True)
class CommandLine:
    """What a command reads from its MODEL, pasted line and own options."""

    model: str
    settings: dict[str, Any]
    """Engine settings by EngineConfig field: the pasted line's and the own options'."""
    ignored: list[str]
    """The pasted line's flags kvplan does not read (those in IGNORED_EFFECTS were warned)."""
    manager_off: str | None = None
    """The pasted flag that turns vLLM's hybrid KV cache manager off, if any."""

    def load(self) -> tuple[ModelSpec, ModelSpec]:
        """(the model, the model as vLLM lays out its KV cache): the second has its sliding
        layers cached in full when a pasted flag turned the hybrid KV cache manager off."""
        from kvplan.specs.catalog import load_model
        from kvplan.specs.disagg import kv_transfer_model

        model = load_model(self.model)
        off = self.manager_off
        return model, (model if off is None else kv_transfer_model(model, off))

    def note_ignored(self) -> None:
        """The ignored flags not warned about one by one, in one ``note:`` line on stderr."""
        rest = [f for f in self.ignored if f not in WARNED]
        if rest:
            print(f"note: ignored vLLM flags: {', '.join(rest)}", file=sys.stderr)


EAGER_STEPS = ("warning: --enforce-eager ignored: without CUDA graphs decode steps are "
               "slower; kvplan's step times assume CUDA graphs (only capacity reads the flag: "
               "no graph memory)")


def read_command_line(args: list[str], own: dict[str, Any], *,
                      prices_steps: bool = False) -> CommandLine:
    """MODEL and settings from the positional MODEL and / or a pasted line, beside ``own``
    (the command's own options that were given, by field). ``prices_steps`` (latency,
    simulate): a pasted --enforce-eager is warned about, as their step times keep CUDA graphs."""
    args = _split_quoted_line(args)
    if not args:
        raise InputError("give a MODEL, or a vLLM command line after -- (vllm serve MODEL ...)")
    if len(args) == 1:
        return CommandLine(args[0], dict(own), [])
    if not is_pasted_start(args[0]):  # MODEL -- vllm serve MODEL ...: one model, both read
        pasted, ignored = parse_vllm_command(args[1:])
        if pasted.setdefault("model", args[0]) != args[0]:
            raise InputError(f"MODEL {args[0]} and the pasted line's {pasted['model']} differ: "
                             "give one of them")
    else:
        pasted, ignored = parse_vllm_command(args)
    for line in warn_ignored(ignored):
        print(line, file=sys.stderr)
    if prices_steps and pasted.get("enforce_eager"):
        print(EAGER_STEPS, file=sys.stderr)
    if "model" not in pasted:
        raise InputError("give a MODEL, or a vLLM command line after -- (vllm serve MODEL ...)")
    _check_given_once(pasted, own)
    off = [f for f in ignored if f in HYBRID_MANAGER_OFF]
    # modelled (kv_transfer_model): no longer ignored, but for a connector's buffers
    ignored = [f for f in ignored if f not in off or f in IGNORED_EFFECTS]
    model = pasted.pop("model")
    return CommandLine(model, {**pasted, **own}, ignored, off[0] if off else None)


def _check_given_once(pasted: dict[str, Any], own: dict[str, Any]) -> None:
    """A setting given both as the command's option and in the pasted line: refused, naming
    both (neither silently wins)."""
    both = [field for field in pasted if field in own]
    if not both:
        return
    field = both[0]
    env = {v: k for k, v in ENV_SETTINGS.items()}
    line = env[field] if field in env else _shown(field, pasted[field])
    raise InputError(f"{_shown(field, own[field])} (before --) and the pasted line's {line} "
                     f"both set {field}: give it once, as an option or in the line")


def _shown(field: str, value: Any) -> str:
    """The option as given: ``--max-num-seqs 64``, ``--no-enable-prefix-caching``."""
    flag = BY_FIELD.get(field)
    name = OWN_NAMES.get(field) or (flag.names[0] if flag else f"--{field.replace('_', '-')}")
    if flag is not None and flag.is_bool:
        return name if value else f"--no-{name[2:]}"
    return f"{name} {value}"


def _split_quoted_line(args: list[str]) -> list[str]:
    """A pasted line given quoted, as one word (``-- "vllm serve M --flag v"``, after a MODEL
    or alone), split as the shell would have (backslash-newline continuations dropped)."""
    head = 1 if len(args) == 2 and not is_pasted_start(args[0]) else 0
    line = args[head:]
    if len(line) != 1 or not line[0].split() or not is_pasted_start(line[0].split()[0]):
        return args
    try:
        return args[:head] + [w for w in shlex.split(line[0]) if w.strip()]
    except ValueError as exc:  # an unclosed quote
        raise InputError(f"cannot split the pasted line into words ({exc}); paste it after "
                         "-- without quotes around it") from None
