"""The package layout ARCHITECTURE.md promises: one installed namespace, no import
cycles, arrows pointing down only.

The import graph is read statically from every module's source (imports inside
functions included, since a lazy import is still a dependency), so a cycle fails
here even when no test happens to execute both ends of it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
# Repository folder -> installed package name (pyproject.toml's package-dir).
FOLDERS = {"skillbase": "skillbase", "memory": "skillbase.memory", "retrievers": "skillbase.retrievers",
           "mcp_server": "skillbase.mcp_server", "seeds": "skillbase.seeds"}
BARE = ("memory", "retrievers", "mcp_server", "seeds")


def project_modules() -> dict[str, Path]:
    """Installed module name -> file, for every module of the project (seed task and
    skill-example files are data: each is a standalone KernelBench module)."""
    mods: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder)
            if folder == "seeds" and rel.parts[0] in ("tasks", "skills"):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join([package, *parts])] = path
    return mods


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules that ``name`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    mods = project_modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        g.add_edges_from((name, t) for t in imports_of(name, path, set(mods)))
    return g


def test_the_walker_sees_the_project(graph):
    # A walker that found nothing would pass every check below.
    assert graph.number_of_nodes() > 80
    assert graph.has_edge("skillbase.api", "skillbase.memory.store")
    assert graph.has_edge("skillbase.console", "skillbase.agent.cli")


def test_no_import_cycles(graph):
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


@pytest.mark.parametrize("low, high", [
    ("skillbase.toolchain", "skillbase.memory"), ("skillbase.toolchain", "skillbase.retrievers"),
    ("skillbase.memory", "skillbase.retrievers"), ("skillbase.memory", "skillbase.mcp_server"),
    ("skillbase.retrievers", "skillbase.api"), ("skillbase.api", "skillbase.agent"),
    ("skillbase.api", "skillbase.cli"), ("skillbase.api", "skillbase.mcp_server"),
    ("skillbase.cli", "skillbase.agent"), ("skillbase.models", "skillbase.toolchain"),
    ("skillbase.api", "skillbase.ui"), ("skillbase.memory", "skillbase.ui"), ("skillbase.ui", "skillbase.agent"),
])
def test_arrows_point_down(graph, low, high):
    """Nothing in ``low`` reaches anything in ``high`` through any chain of imports."""
    lows = [n for n in graph if n == low or n.startswith(low + ".")]
    reached = set().union(*(nx.descendants(graph, n) for n in lows))
    bad = sorted(n for n in reached if n == high or n.startswith(high + "."))
    assert not bad, f"{low} reaches {bad}"


def test_no_module_imports_a_bare_top_level_name(graph):
    offenders = []
    for name, path in project_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            offenders += [f"{name}: {m}" for m in mods if m.split(".")[0] in BARE]
    assert not offenders


def test_bare_names_are_not_importable(tmp_path):
    """Installed, only ``skillbase`` exists: a bare ``memory`` is someone else's package."""
    code = ("import importlib.util, sys\n"
            f"print([n for n in {BARE!r} if importlib.util.find_spec(n) is not None])\n"
            "import skillbase.memory.store, skillbase.retrievers.retriever, skillbase.mcp_server.server\n"
            "from skillbase import seeds\n"
            "print(seeds.TASKS_DIR.is_dir())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True"]


def test_an_uninstalled_checkout_maps_the_namespace(tmp_path):
    """``PYTHONPATH=<checkout>`` without installing (how GPU boxes run it): ``skillbase.seeds`` and the
    other mapped folders resolve to the checkout's top-level folders, from any working directory,
    ``python -m`` from the checkout's root included."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys\n"
            "sys.path = [p for p in sys.path if 'site-packages' not in p]\n"  # no installed skillbase
            "import importlib.util\n"
            "from skillbase import seeds\n"
            "print(seeds.TASKS_DIR.is_dir(), seeds.__name__)\n"
            "print(all(importlib.util.find_spec(n) is not None for n in "
            "('skillbase.memory.store', 'skillbase.retrievers', 'skillbase.mcp_server')))\n")
    for cwd in (tmp_path, root):
        out = subprocess.run([sys.executable, "-S", "-c", code], cwd=cwd, capture_output=True, text=True,
                             timeout=60, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True", "skillbase.seeds", "True"], out.stdout


def test_python_source_is_parsed_through_one_lock():
    """Every ``ast.parse`` of the project goes through ``skillbase.pyast.parse`` (CPython 3.11's parser
    shares its depth counter between threads, and parallel evaluations parse candidates at once)."""
    offenders = []
    for name, path in project_modules().items():
        if name == "skillbase.pyast":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"ast.parse outside skillbase.pyast: {offenders}"
