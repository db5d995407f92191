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
    "memo": 0,
    "api_check": 0,
    "notes": 0,
    "raw_arrays": 0,
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


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def _graph() -> dict[str, set[str]]:
    """Module -> the kvplan modules it imports anywhere (top level, in functions, or under
    TYPE_CHECKING); importing a submodule is not an edge to its parent packages."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names} & paths.keys()
                found |= subs if len(subs) == len(node.names) else subs | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found & paths.keys()
                       if m != name and m != "kvplan" and not name.startswith(m + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (as a path), or [] when the graph has none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_circles() -> None:
    assert _cycle(_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_no_folder_holds_more_than_about_twenty_modules() -> None:
    crowded = {}
    for folder in [ROOT, *(p for p in ROOT.rglob("*") if p.is_dir())]:
        count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        if count > 20:
            crowded[str(folder.relative_to(ROOT.parent))] = count
    assert crowded == {}


ROOMS = {
    # room -> the rooms (same layer) it may import; its own room is always allowed
    "kvplan.costs": set(),
    "kvplan.costs.kernels": set(),
    "kvplan.costs.memory": set(),
    "kvplan.costs.pricing": set(),
    "kvplan.costs.step": {"kvplan.costs.kernels", "kvplan.costs.memory"},
    "kvplan.analysis": set(),
    "kvplan.analysis.plan": {"kvplan.analysis"},
    "kvplan.analysis.calibration": {"kvplan.analysis"},
    "kvplan.analysis.disagg": {"kvplan.analysis", "kvplan.analysis.plan"},
}


def _room(module: str) -> str | None:
    for room in sorted(ROOMS, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return None


def test_rooms_within_a_layer_import_in_order() -> None:
    """costs/: kernels and memory stand alone, step stands on both; analysis/: the planner
    and calibration stand on analysis' own modules, never on each other, and those modules
    never on them."""
    wrong = []
    for name, imports in _graph().items():
        own = _room(name)
        if own is None:
            continue
        for other in imports:
            room = _room(other)
            same_layer = other.split(".")[1] == own.split(".")[1]
            if room is not None and same_layer and room != own and room not in ROOMS[own]:
                wrong.append(f"{name} imports {other}")
    assert wrong == []


def test_files_and_functions_stay_small() -> None:
    """The style guide's limits: a module at most 400 lines, a function at most 50."""
    big, long = [], []
    for path in ROOT.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT.parent)
        if text.count("\n") > 400:
            big.append(f"{rel}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 50:
                    long.append(f"{rel}:{node.lineno} {node.name}: {lines} lines")
    assert big == [] and long == []
