"""Errors raised for bad user input; the CLI prints their message on one line and exits 2."""

from __future__ import annotations


class KvplanError(ValueError):
    """Base class: something the user gave is wrong; the message says what and what to do."""


def located(where: str, exc: BaseException | str) -> str:
    """``where: message``, once: a message that already starts with ``where:`` (raised by a
    helper that knew the location) is not prefixed again."""
    text = str(exc)
    return text if text.startswith(f"{where}:") else f"{where}: {text}"


class InputError(KvplanError):
    """A flag, length or value is out of range or contradictory."""


class ConfigError(KvplanError):
    """A model config.json cannot be understood; names the field and the file."""

    def __init__(self, message: str, *, field: str | None = None, file: str | None = None):
        where = f" in {file}" if file else ""
        what = f"field '{field}'{where}: " if field else (f"{file}: " if file else "")
        super().__init__(f"{what}{message}")
        self.field = field
        self.file = file


class UnknownNameError(KvplanError):
    """A model, GPU, dtype or dataset name is not in the catalog."""


class DoesNotFitError(KvplanError):
    """Something does not fit in memory: says needed vs available and what would fit."""

    def __init__(self, message: str, *, needed_bytes: int = 0, available_bytes: int = 0):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes


class KvTooSmallError(DoesNotFitError):
    """The model fits but its KV cache holds less than one request of max_model_len (vLLM
    refuses to start): the KV cache is what does not fit, not the weights."""


class TraceError(KvplanError):
    """A trace or measurement file is malformed; names the file, line and column."""


class ArgumentTypeError(KvplanError, TypeError):
    """A Python API argument (or a field of a public dataclass) of the wrong type: names it,
    what it takes and what it got. Both a KvplanError (the CLI prints one line) and a
    TypeError (what Python code expects for a wrong type)."""
