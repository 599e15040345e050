"""The layers import one way: sims <- theory, sims <- llm_validation, everything <- figures.

Every ``import``/``from ... import`` in every file of every layer is read with ``ast`` (module
level, inside functions, classes, ``try`` blocks and ``if TYPE_CHECKING``), relative imports are
resolved against the file's package, and ``importlib.import_module("...")`` / ``__import__("...")``
with a literal name count too. A layer may import only the layers below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What each layer must never import.
FORBIDDEN = {
    "sims": {"theory", "llm_validation", "figures"},
    "theory": {"llm_validation", "figures"},
    "llm_validation": {"figures"},
    "figures": set(),
}


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``source`` (the file of ``module``)."""
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level > len(parts):
                    raise ImportError(f"{module}:{node.lineno}: relative import beyond the top")
                base = ".".join(parts[: len(parts) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            out.append((node.lineno, name))  # `from .. import x`: x lives in `name`'s layer
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.append((node.lineno, node.args[0].value))
    return sorted(out)


def violations(layer: str, root: Path = ROOT) -> list[str]:
    bad = []
    for path in sorted((root / layer).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        is_pkg = rel.name == "__init__"
        module = ".".join(rel.parts[:-1] if is_pkg else rel.parts)
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module, is_pkg):
            if name.split(".")[0] in FORBIDDEN[layer]:
                bad.append(f"{path.relative_to(root)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_down_only(layer):
    assert (ROOT / layer).is_dir()
    assert violations(layer) == []


def test_the_scanner_sees_nested_relative_and_dynamic_imports(tmp_path):
    pkg = tmp_path / "sims" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "sims" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        "import numpy\n"
        "def f():\n"
        "    if True:\n"
        "        from theory.sam_saddle import reduced_map\n"
        "class C:\n"
        "    def g(self):\n"
        "        import importlib\n"
        "        return importlib.import_module('figures.fig01_linear_attention')\n"
        "try:\n"
        "    import llm_validation.data.records as d\n"
        "except ImportError:\n"
        "    pass\n"
        "from .. import theory\n"  # sims.theory: a sibling module, not the layer
        "from ..sub import mod\n"
    )
    found = violations("sims", tmp_path)
    assert [f.split(" imports ")[1] for f in found] == [
        "theory.sam_saddle",
        "figures.fig01_linear_attention",
        "llm_validation.data.records",
    ]
    assert imported_modules("from .. import theory\n", "sims.sub.mod", False) == [(1, "sims")]


# --------------------------------------------------------------------------- import circles


def import_graph(layer: str, root: Path = ROOT) -> dict[str, set[str]]:
    """``module -> {modules of the layer it imports}`` for every file of ``layer``.

    Every import counts, at module level or inside a function (a lazy import still ties the two
    modules together). ``from pkg import name`` is an import of ``pkg.name`` when that is a
    module of the layer, else of ``pkg``; a module's parent packages are not counted (Python
    runs them first, whatever the module imports).
    """
    files = {}
    for path in sorted((root / layer).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        is_pkg = rel.name == "__init__"
        files[".".join(rel.parts[:-1] if is_pkg else rel.parts)] = (path, is_pkg)
    graph: dict[str, set[str]] = {}
    for module, (path, is_pkg) in files.items():
        source = path.read_text(encoding="utf-8")
        found = [(line, name) for line, name in imported_modules(source, module, is_pkg)]
        package = module if is_pkg else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):  # `from pkg import sub`: the submodule
            if isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                pkg = ".".join(p for p in (base, node.module or "") if p)
                subs = [f"{pkg}.{a.name}" for a in node.names if f"{pkg}.{a.name}" in files]
                if len(subs) == len(node.names):  # only submodules: `pkg` itself is not used
                    found.remove((node.lineno, pkg))
                found += [(node.lineno, sub) for sub in subs]
        names = {name for _, name in found}
        graph[module] = {n for n in names if n in files and n != module}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle of ``graph`` as its modules in import order, first module repeated at the end.

    One circle per strongly connected component of more than one module (Tarjan's algorithm,
    iterative), shown as a shortest cycle through its smallest module.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        components.append(set(comp))
    circles = []
    for comp in components:  # a shortest path back to the smallest module, by breadth first
        first = min(comp)
        paths = {first: [first]}
        queue = [first]
        found = None
        while queue and found is None:
            v = queue.pop(0)
            for w in sorted(graph[v] & comp):
                if w == first:
                    found = [*paths[v], first]
                    break
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    queue.append(w)
        circles.append(found)
    return sorted(circles)


@pytest.mark.parametrize("layer", ["sims", "theory", "llm_validation", "figures"])
def test_no_import_circle(layer):
    """No module of a layer imports (at any depth, lazily or not) a module that imports it back."""
    graph = import_graph(layer)
    assert len(graph) > 10 and any(graph.values())
    circles = import_circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_a_planted_circle_is_found(tmp_path):
    """The circle of issue 32 (cli -> markov.experiments -> io -> cli), planted in a copy."""
    pkg = tmp_path / "sims"
    (pkg / "markov").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("class UsageError(ValueError): ...\n")
    (pkg / "io.py").write_text("from .errors import UsageError\n")
    (pkg / "cli.py").write_text("from . import io\n")
    (pkg / "markov" / "__init__.py").write_text("")
    (pkg / "markov" / "experiments.py").write_text("def f():\n    from sims.runtime.io import x\n")
    (pkg / "other.py").write_text("from sims.markov import experiments\n")
    graph = import_graph("sims", tmp_path)
    assert graph["sims.runtime.cli"] == {"sims.runtime.io"} and graph["sims.other"] == {"sims.markov.experiments"}
    assert import_circles(graph) == []
    (pkg / "io.py").write_text("from .errors import UsageError\n")
    (pkg / "cli.py").write_text(
        "from . import io\ndef scale():\n    from sims.markov.experiments import scale\n"
    )
    (pkg / "io.py").write_text("from .cli import UsageError\n")
    assert import_circles(import_graph("sims", tmp_path)) == [["sims.runtime.cli", "sims.runtime.io", "sims.runtime.cli"]]
    (pkg / "io.py").write_text("from .errors import UsageError\n")
    (pkg / "markov" / "experiments.py").write_text("def f():\n    from ..cli import fail\n")
    assert import_circles(import_graph("sims", tmp_path)) == [
        ["sims.runtime.cli", "sims.markov.experiments", "sims.runtime.cli"]
    ]
