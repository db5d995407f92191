"""The one rule of the tree: specs -> costs -> sim -> analysis -> report -> web -> cli, imports
go left (the web never imports the CLI; `kvplan web` starts the web)."""

import ast
from pathlib import Path

import kvplan

LAYERS = {
    "units": 0,
    "errors": 0,
    "limits": 0,
    "jsonread": 0,
    "atomic_file": 0,
    "input_file": 0,
    "api_check": 0,
    "specs": 1,
    "costs": 2,
    "sim": 3,
    "analysis": 4,
    "report": 5,
    "web": 6,
    "cli": 7,
}
ROOT = Path(kvplan.__file__).parent


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "kvplan" and len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_each_layer_imports_only_from_its_left() -> None:
    wrong = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        for module in _imports(path):
            other = _layer(module)
            if other is not None and other > own:
                wrong.append(f"{rel} imports {module}")
    assert wrong == []


def test_only_sim_holds_mutable_dataclasses() -> None:
    """Outside sim/, every dataclass is frozen (values, not state)."""
    mutable = []
    for path in ROOT.rglob("*.py"):
        if "sim" in path.relative_to(ROOT).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                _is_mutable_dataclass(d) for d in node.decorator_list
            ):
                mutable.append(f"{path.name}:{node.name}")
    assert mutable == []


def _is_mutable_dataclass(deco: ast.expr) -> bool:
    if isinstance(deco, ast.Name):
        return deco.id == "dataclass"  # bare @dataclass: mutable
    if isinstance(deco, ast.Call) and getattr(deco.func, "id", "") == "dataclass":
        return not any(
            k.arg == "frozen" and getattr(k.value, "value", False) for k in deco.keywords
        )
    return False


def test_mutable_dataclass_detector() -> None:
    frozen, bare, unfrozen = (
        ast.parse(src).body[0].decorator_list[0]  # type: ignore[attr-defined]
        for src in (
            "@dataclass(frozen=True)\nclass A: ...",
            "@dataclass\nclass A: ...",
            "@dataclass(slots=True)\nclass A: ...",
        )
    )
    assert (
        _is_mutable_dataclass(frozen),
        _is_mutable_dataclass(bare),
        _is_mutable_dataclass(unfrozen),
    ) == (False, True, True)
