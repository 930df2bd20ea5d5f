"""The house as docs/architecture.md draws it: every module named there, arrows pointing down
the pipeline, no import cycle, and a core that never imports its second door."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "mjsysid"
DOC = ROOT / "docs" / "architecture.md"
# the pipeline's floors, lowest first; a module imports from its own floor and lower ones
STAGES = ("util", "params", "data", "sim", "objective", "fit", "output", "lab", "app", "compat")


def _modules() -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package (examples hold data only)."""
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if "examples" not in parts:
            out[".".join(parts)] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (function-local and
    type-checking imports included); ``from pkg import mod`` counts as importing ``mod``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _stage(name: str) -> int | None:
    parts = name.split(".")
    return STAGES.index(parts[1]) if len(parts) > 1 and parts[1] in STAGES else None


def test_every_module_is_on_the_plan_and_every_file_on_the_plan_exists():
    doc = DOC.read_text(encoding="utf-8")
    named = {
        n.rpartition("/")[2]
        for n in re.findall(r"`([\w/]+\.py)`", doc)
        if not n.startswith(("tests/", "bench/"))
    }
    missing = [
        str(path.relative_to(SRC))
        for name, path in MODULES.items()
        if _stage(name) is not None
        and name.split(".")[1] != "compat"  # its modules mirror the peer's paths
        and path.name != "__init__.py"
        and not (name.startswith("mjsysid.app.commands.") and path.stem != "common")
        and path.name not in named
    ]
    assert missing == [], f"modules docs/architecture.md does not name: {missing}"
    files = {p.name for p in SRC.rglob("*.py")}
    assert sorted(named - files) == [], "docs/architecture.md names files that do not exist"


def test_arrows_point_down_the_pipeline():
    upward = [
        f"{name} -> {dep}"
        for name, deps in GRAPH.items()
        for dep in deps
        if _stage(name) is not None and _stage(dep) is not None and _stage(dep) > _stage(name)  # type: ignore[operator]
    ]
    assert upward == []


def test_the_core_never_imports_the_second_door():
    core = [n for n in GRAPH if not n.startswith("mjsysid.compat")]
    assert [f"{n} -> {d}" for n in core for d in GRAPH[n] if d.startswith("mjsysid.compat")] == []


def test_no_import_cycle():
    """Tarjan's strongly connected components of the module graph: all of size one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_import_scan_sees_every_kind_of_import():
    """(A scan that found nothing would pass every test above.)"""
    assert "mjsysid.util.errors" in GRAPH["mjsysid.fit.options"]  # from-import of a name
    assert "mjsysid.output.report" in GRAPH["mjsysid.app.commands.common"]  # function-local
    assert "mjsysid.params.parameter" in GRAPH["mjsysid.lab.prediction"]  # type-checking
    assert "mjsysid.compat._src.model_modifier" in GRAPH["mjsysid.compat"]  # a module by name
