"""Derive the option strings ``vllm serve`` accepts from vLLM's own sources (no vLLM import).

vLLM builds its serve parser in ``entrypoints/openai/cli_args.py`` (make_arg_parser: a few
explicit options, then one ``--field-name`` per FrontendArgs field) and
``engine/arg_utils.py`` (EngineArgs / AsyncEngineArgs.add_cli_args: one explicit
``add_argument`` per option, its kwargs from ``get_kwargs(SomeConfig)["field"]``). A field
typed ``bool`` (at the Union/Annotated level, as vLLM's get_type_hints flattens it) gets
``argparse.BooleanOptionalAction``: ``--x`` and ``--no-x``, no value. This script reads those
files with ``ast`` and writes every option string and whether it takes a value.

Made for kvplan's ``src/kvplan/data/vllm/serve_flags.json`` with::

    pip download vllm==0.11.0 --no-deps --only-binary :all: \\
        --platform manylinux1_x86_64 --python-version 3.12 -d /tmp/vllm
    unzip -q /tmp/vllm/vllm-0.11.0-*.whl 'vllm/*.py' -d /tmp/vllm/src
    python scripts/derive_vllm_serve_flags.py /tmp/vllm/src > src/kvplan/data/vllm/serve_flags.json
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version"}


def config_fields(root: Path) -> dict[str, dict[str, ast.expr]]:
    """Class name -> {field: annotation} for every class under vllm/config and FrontendArgs."""
    out: dict[str, dict[str, ast.expr]] = {}
    files = [*sorted((root / "vllm" / "config").glob("*.py")),
             root / "vllm" / "entrypoints" / "openai" / "cli_args.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out[node.name] = {s.target.id: s.annotation for s in node.body
                                  if isinstance(s, ast.AnnAssign)
                                  and isinstance(s.target, ast.Name)}
    return out


def is_bool(ann: ast.expr) -> bool:
    """vLLM's contains_type(get_type_hints(t), bool): bool at the Union/Optional/Annotated level."""
    if isinstance(ann, ast.Name):
        return ann.id == "bool"
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return is_bool(ast.parse(ann.value, mode="eval").body)
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return is_bool(ann.left) or is_bool(ann.right)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name):
        inner = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if ann.value.id in ("Optional", "Union"):
            return any(is_bool(x) for x in inner)
        if ann.value.id in ("Annotated", "SkipValidation"):  # pydantic: Annotated[T, ...]
            return is_bool(inner[0])
    return False


def _kwargs_sources(func: ast.FunctionDef) -> dict[str, str]:
    """``model_kwargs = get_kwargs(ModelConfig)`` -> {'model_kwargs': 'ModelConfig'}."""
    out = {}
    for node in ast.walk(func):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "get_kwargs"
                and isinstance(node.value.args[0], ast.Name)
                and isinstance(node.targets[0], ast.Name)):
            out[node.targets[0].id] = node.value.args[0].id
    return out


def _loop_values(func: ast.FunctionDef) -> dict[str, list[str]]:
    """``for arg, type in [("--x", str), ...]`` -> {'arg': ['--x', ...]}."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List):
            names = (node.target.elts if isinstance(node.target, ast.Tuple) else [node.target])
            for i, name in enumerate(names):
                if isinstance(name, ast.Name):
                    out[name.id] = [t.elts[i].value for t in node.iter.elts
                                    if isinstance(t, ast.Tuple)
                                    and isinstance(t.elts[i], ast.Constant)]
    return out


def _no_value(call: ast.Call, sources: dict[str, str],
              fields: dict[str, dict[str, ast.expr]]) -> tuple[bool, bool]:
    """(takes no value, has --no- twins) for one add_argument call."""
    for kw in call.keywords:
        if kw.arg == "action":
            if isinstance(kw.value, ast.Constant):
                return kw.value.value in NO_VALUE_ACTIONS, False
            if isinstance(kw.value, ast.Attribute):
                boolean = kw.value.attr == "BooleanOptionalAction"
                return boolean, boolean
            return False, False
    for kw in call.keywords:
        if kw.arg is None and isinstance(kw.value, ast.Subscript):
            holder, key = kw.value.value, kw.value.slice
            if isinstance(holder, ast.Name) and isinstance(key, ast.Constant):
                ann = fields.get(sources.get(holder.id, ""), {}).get(key.value)
                boolean = ann is not None and is_bool(ann)
                return boolean, boolean
    return False, False


def parser_flags(func: ast.FunctionDef, fields: dict[str, dict[str, ast.expr]]
                 ) -> dict[str, bool]:
    """Option string -> takes a value, for every add_argument call in one function."""
    sources, loops = _kwargs_sources(func), _loop_values(func)
    out: dict[str, bool] = {}
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names: list[str] = []
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                names.append(a.value)
            elif isinstance(a, ast.Name):
                names += loops.get(a.id, [])
        no_value, twins = _no_value(node, sources, fields)
        for n in (n for n in names if n.startswith("-")):
            out[n] = not no_value
            if twins and n.startswith("--"):
                out["--no-" + n[2:]] = False
    return out


def frontend_flags(fields: dict[str, dict[str, ast.expr]]) -> dict[str, bool]:
    """FrontendArgs.add_cli_args: ``--{field}`` per field; lora_modules/middleware keep values."""
    out: dict[str, bool] = {}
    for name, ann in fields["FrontendArgs"].items():
        flag = "--" + name.replace("_", "-")
        boolean = is_bool(ann) and name not in ("lora_modules", "middleware")
        out[flag] = not boolean
        if boolean:
            out["--no-" + flag[2:]] = False
    return out


def functions(path: Path, names: set[str]) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.FunctionDef) and n.name in names]


def main(root: Path) -> dict[str, object]:
    fields = config_fields(root)
    flags: dict[str, bool] = {"-h": False, "--help": False}
    cli_args = root / "vllm" / "entrypoints" / "openai" / "cli_args.py"
    for func in functions(cli_args, {"make_arg_parser"}):
        flags.update(parser_flags(func, fields))
    flags.update(frontend_flags(fields))
    for func in functions(root / "vllm" / "engine" / "arg_utils.py", {"add_cli_args"}):
        flags.update(parser_flags(func, fields))
    version = (root / "vllm" / "_version.py").read_text()
    found = re.search(r"^__version__ = version = '([^']+)'", version, re.M)
    tag = found.group(1) if found else "unknown"
    return {
        "vllm_version": tag,
        "made_by": "scripts/derive_vllm_serve_flags.py from vLLM's wheel sources "
                   "(entrypoints/openai/cli_args.py make_arg_parser + FrontendArgs, "
                   "engine/arg_utils.py EngineArgs/AsyncEngineArgs.add_cli_args)",
        "allow_abbrev": True,
        "flags": {k: {"takes_value": v} for k, v in sorted(flags.items())},
    }


if __name__ == "__main__":
    json.dump(main(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
