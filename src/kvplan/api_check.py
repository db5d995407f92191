"""Type checks at the Python API's door: a wrong-typed argument to a public ``kvplan.NAME``
function (or a wrong-typed field of EngineConfig, Slo, ...) is one ``ArgumentTypeError`` (a
TypeError and a KvplanError) naming the function, the argument, what it takes and what it got,
instead of an AttributeError from deep inside (``'float' object has no attribute 'dtype'``).

``kvplan.__getattr__`` wraps each public function once, from its own annotations; calls made
inside the library use the unwrapped functions, so the planner's inner loops pay nothing.
The check is shallow where that is enough: a class by isinstance, ``X | None`` and unions by
any member, ``Sequence[str]`` and ``tuple[int, ...]`` element by element (a bare str is no
``Sequence[str]`` here: ``parse_slo("ttft:p99:2000")`` would read it letter by letter),
``Mapping`` and ``Callable`` by their kind only. ``int`` takes any integer but not a bool;
``float`` takes any real number but not a bool; a numpy number is passed on as Python's own
(``plain``: an int32 would wrap byte counts at 2**31). Annotations that cannot be resolved at
run time are not checked.
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import numbers
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from kvplan.errors import ArgumentTypeError

_C = TypeVar("_C")

_ITERATED = (list, tuple, set, frozenset, abc.Sequence, abc.Set, abc.MutableSequence)
"""Generic origins whose elements are checked too (never a one-shot iterator)."""


def checked(fn: Callable[..., Any], public_name: str) -> Callable[..., Any]:
    """``fn`` with its annotated arguments checked on every call (TypeError on a mismatch)."""
    signature = inspect.signature(fn)
    hints = _hints(fn, signature)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:  # a missing, unknown or extra argument, named as Python does
            raise ArgumentTypeError(f"kvplan.{public_name}(): {e}") from None
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            if hint is not None and not _matches(value, hint):
                raise ArgumentTypeError(f"kvplan.{public_name}(): argument '{name}' must be "
                                        f"{_describe(hint)}, got {_shown(value)}")
        bound.arguments.update({n: plain(v) for n, v in bound.arguments.items()})
        return fn(*bound.args, **bound.kwargs)

    # pickled by reference as kvplan.NAME (the lazy name resolves to this wrapper), so a
    # process pool or Ray can ship it; wraps' own module would hold the unwrapped function
    wrapper.__module__, wrapper.__qualname__ = "kvplan", public_name
    return wrapper


def named_fields(cls: type[_C]) -> type[_C]:
    """``cls`` (a public dataclass) whose constructor names an unknown, missing or extra
    argument as one ``ArgumentTypeError`` (``kvplan.EngineConfig(): got an unexpected keyword
    argument 'tp' (did you mean ...?)``), as the wrapped functions do, not Python's bare
    TypeError. Only a TypeError raised by the call itself is renamed: the normal path pays
    nothing but the call."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except TypeError as e:
            tb = e.__traceback__
            if isinstance(e, ArgumentTypeError) or tb is None or tb.tb_next is not None:
                raise  # a field's own check, or a TypeError from inside the constructor
            raise ArgumentTypeError(_init_message(cls, str(e))) from None

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def _init_message(cls: type, text: str) -> str:
    """Python's binding complaint as ``kvplan.NAME(): ...`` with a near field name."""
    import dataclasses
    import difflib
    import re

    name, names = cls.__name__, [f.name for f in dataclasses.fields(cls)]
    text = text.removeprefix(f"{name}.__init__() ")
    hint = ""
    unknown = re.search(r"unexpected keyword argument '(\w+)'", text)
    if unknown:
        near = difflib.get_close_matches(unknown.group(1), names, n=1, cutoff=0.5)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"kvplan.{name}(): {text}{hint}"


def check_fields(obj: Any) -> None:
    """Each field of a public dataclass against its annotation (call from __post_init__)."""
    cls = type(obj)
    for name, hint in _field_hints(cls).items():
        value = getattr(obj, name)
        if not _matches(value, hint):
            raise ArgumentTypeError(f"{cls.__name__}: field '{name}' must be "
                                    f"{_describe(hint)}, got {_shown(value)}")


def plain_numbers(obj: Any) -> None:
    """A frozen dataclass's numpy booleans, integers and floats as Python's own
    (``np.int64(8)`` -> 8, ``np.bool_(True)`` -> True), so its checks, its repr and JSON see
    plain values (call first in __post_init__)."""
    for name in _field_hints(type(obj)):
        value = getattr(obj, name)
        if plain(value) is not value:
            object.__setattr__(obj, name, plain(value))


def plain(value: Any) -> Any:
    """A numpy boolean, integer or float as Python's own (``np.int32(100000)`` -> 100000),
    anything else as it is: a numpy int32 argument would wrap byte counts at 2**31
    (100,000 tokens x 131,072 bytes) and leave answers JSON cannot write."""
    if value is None or type(value) in (int, float, bool, str):
        return value
    if _numpy_bool(value):
        return bool(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


def _numpy_bool(value: Any) -> bool:
    """A numpy boolean (``np.bool_``; numpy 2 names its type ``bool``), without importing
    numpy: a pandas column's True, say."""
    return type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")


_FIELD_HINTS: dict[type, dict[str, Any]] = {}
"""Class -> its resolved field annotations (resolved once per class)."""


def _field_hints(cls: type) -> dict[str, Any]:
    if cls not in _FIELD_HINTS:
        try:
            _FIELD_HINTS[cls] = typing.get_type_hints(cls)
        except Exception:
            _FIELD_HINTS[cls] = {}
    return _FIELD_HINTS[cls]


def _hints(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Parameter name -> resolved annotation (those that resolve; *args/**kwargs skipped)."""
    try:
        resolved = typing.get_type_hints(fn)
    except Exception:  # a TYPE_CHECKING-only name: resolve them one by one
        resolved = {}
        scope = getattr(fn, "__globals__", {})
        for name, p in signature.parameters.items():
            one = types.SimpleNamespace(__annotations__={name: p.annotation})
            try:
                resolved |= typing.get_type_hints(one, globalns=scope)
            except Exception:
                continue
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
             inspect.Parameter.KEYWORD_ONLY)
    return {n: resolved[n] for n, p in signature.parameters.items()
            if p.kind in plain and n in resolved}


def _matches(value: Any, hint: Any) -> bool:
    if type(value) is hint:  # the common case: exactly the class (an int for int, ...)
        return True
    if hint is Any or hint is object or isinstance(hint, typing.TypeVar | str):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is not None:
        return _generic(value, origin, args)
    if hint is bool:
        return _numpy_bool(value)  # a Python bool matched above (type(value) is hint)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def _generic(value: Any, origin: Any, args: tuple[Any, ...]) -> bool:
    if not isinstance(origin, type) or not isinstance(value, origin):
        return not isinstance(origin, type)  # an origin we cannot test: accept
    if isinstance(value, str) and origin in _ITERATED:
        return False  # a str is a Sequence of its characters, never the list of items meant
    if origin is type or not args or origin not in _ITERATED:
        return True
    items: Any = value
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return len(items) == len(args) and all(map(_matches, items, args))
    return all(_matches(v, args[0]) for v in items)


def _describe(hint: Any) -> str:
    if hint is None or hint is type(None):
        return "None"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
