"""The layering of docs/architecture.md: packages import only from lower layers, and no
module imports itself back through others (function-level imports count too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rlvr"

LAYERS = {
    "rlvr": 0,
    "builtins": 0,
    "bundled": 0,
    "atomic": 0,
    "locks": 0,
    "dotted": 0,
    "seeds": 0,
    "advantages": 0,
    "ops": 0,
    "sandbox": 0,
    "objectives": 1,
    "rewards": 1,
    "data": 1,
    "generation": 1,
    "models": 1,
    "evaluation": 2,
    "train": 3,
    "presets": 4,
    "engines": 4,
    "compare": 4,
    "pipeline": 4,
    "cli": 5,
    "__main__": 6,
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {name for name in found if name == "rlvr" or name.startswith("rlvr.")}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rlvr"


def test_every_package_has_a_layer():
    assert {_package(m) for m in _graph()} <= set(LAYERS)


def test_packages_import_only_from_lower_layers():
    wrong = []
    for module, targets in _graph().items():
        source = _package(module)
        for target in targets:
            dest = _package(target)
            if dest == source or (dest == "rlvr" and target == "rlvr"):
                continue
            if LAYERS[dest] >= LAYERS[source]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_circles_between_modules():
    graph = _graph()
    for name in graph:  # a package's __init__ re-exporting its modules is no circle
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state, circles = {}, []

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(path[path.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_the_paths_where_a_new_piece_goes_are_the_layout_of_the_package():
    """Each ``rlvr/...`` path of docs/architecture.md exists; a ``<placeholder>.py`` names a
    folder of modules, a ``<placeholder>/`` one of packages (engine adapters are packages,
    ``rlvr/engines/<engine>/``; the page said ``<engine>.py``)."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    paths = set(re.findall(r"`(rlvr/[^`]*)`", text))
    assert "rlvr/engines/<engine>/" in paths
    for path in sorted(paths):
        folder, _, last = path.rstrip("/").rpartition("/")
        where = SRC.parent / (folder if last.startswith("<") else path)
        assert where.exists(), path
        if last.startswith("<") and path.endswith("/"):
            assert any((d / "__init__.py").exists() for d in where.iterdir()), path
        elif last.startswith("<"):
            assert [m for m in where.glob("*.py") if m.name != "__init__.py"], path


def test_the_doc_table_gives_each_package_its_layer():
    """docs/architecture.md's table lists every package (``rlvr.<name>``) at the layer checked
    above (``rlvr``, ``__main__``: the package itself and its entry point, not in the table)."""
    text = (SRC.parents[1] / "docs" / "architecture.md").read_text()
    documented = {}
    for row in re.findall(r"^\| (\d) \| ([^|]+) \|", text, flags=re.M):
        for name in re.findall(r"`rlvr\.(\w+)`", row[1]):
            documented[name] = int(row[0])
    expected = {k: v for k, v in LAYERS.items() if k not in ("rlvr", "__main__")}
    assert documented == expected
