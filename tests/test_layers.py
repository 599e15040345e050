"""The layers import one way: sims <- theory, sims <- llm_validation, everything <- figures.

Inside ``sims`` and ``llm_validation`` the floors (sub-folders, top-level modules) import one way
too, as the table :data:`ALLOWED` says (issue 39).

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
    rt = pkg / "runtime"
    (pkg / "markov").mkdir(parents=True)
    rt.mkdir()
    (pkg / "__init__.py").write_text("")
    (rt / "__init__.py").write_text("")
    (rt / "errors.py").write_text("class UsageError(ValueError): ...\n")
    (rt / "io.py").write_text("from .errors import UsageError\n")
    (rt / "cli.py").write_text("from . import io\n")
    (pkg / "markov" / "__init__.py").write_text("")
    (pkg / "markov" / "experiments.py").write_text("def f():\n    from sims.runtime.io import x\n")
    (pkg / "other.py").write_text("from sims.markov import experiments\n")
    graph = import_graph("sims", tmp_path)
    assert graph["sims.runtime.cli"] == {"sims.runtime.io"}
    assert graph["sims.other"] == {"sims.markov.experiments"}
    assert import_circles(graph) == []
    (rt / "cli.py").write_text(
        "from . import io\ndef scale():\n    from sims.markov.experiments import scale\n"
    )
    (rt / "io.py").write_text("from .cli import UsageError\n")
    assert import_circles(import_graph("sims", tmp_path)) == [  # from its smallest module
        ["sims.markov.experiments", "sims.runtime.io", "sims.runtime.cli",
         "sims.markov.experiments"]  # fmt: skip
    ]
    (rt / "io.py").write_text("from .errors import UsageError\n")
    (pkg / "markov" / "experiments.py").write_text("def f():\n    from ..runtime.cli import fail\n")
    assert import_circles(import_graph("sims", tmp_path)) == [
        ["sims.markov.experiments", "sims.runtime.cli", "sims.markov.experiments"]
    ]


# --------------------------------------------------------------------------- floors (issue 39)

#: The floors of a layer, bottom to top, and what each may import of its own layer (itself aside).
#: A floor is a sub-folder or a top-level module; the layer's own ``__init__`` imports nothing.
#: ``sims``: ``science`` is its top-level science modules (``scalar_odes``, ``entropy``,
#: ``sam_entropy``, ...); ``sosd_toy`` is the ``python -m sims.sosd_toy`` entry.
ALLOWED: dict[str, dict[str, set[str]]] = {
    "llm_validation": {
        "data": set(),
        "runs": set(),
        "execution": set(),  # the sandbox (model-written code runs only there)
        "config": {"data"},
        "evaluate": {"data", "config", "runs", "execution"},
        "models": {"data", "config", "runs", "execution"},
        "select": {"data", "config", "runs", "execution", "evaluate", "models"},
        "train": {"data", "config", "runs", "execution", "evaluate", "models"},
        "experiments": {"data", "config", "runs", "execution", "evaluate", "models", "select",
                        "train"},  # fmt: skip
        "campaign": {"data", "config", "runs", "execution", "evaluate", "models", "select", "train",
                     "experiments"},  # fmt: skip
        "__main__": {"data", "config", "runs", "execution", "evaluate", "models", "select", "train",
                     "experiments", "campaign"},  # fmt: skip
    },
    "sims": {
        "runtime": set(),
        "optim": {"runtime"},
        "science": {"runtime"},
        "lm": {"runtime", "optim"},
        "markov": {"runtime", "optim", "science"},
        "linear_attention": {"runtime", "optim", "science"},
        "sosd": {"runtime", "optim", "science", "lm", "markov", "linear_attention"},
        "sosd_toy": {"sosd"},
    },
}


def floor_of(module: str, layer: str, root: Path = ROOT) -> str | None:
    """The floor of ``module`` (``None``: the layer's own ``__init__``)."""
    parts = module.split(".")
    if parts[0] != layer or len(parts) == 1:
        return None
    name = parts[1]
    if name in ALLOWED[layer]:
        return name
    if layer == "sims" and (root / layer / f"{name}.py").is_file():
        return "science"
    return name  # a floor missing from the table: every import of or from it is reported


def floor_violations(layer: str, root: Path = ROOT) -> list[str]:
    """``"a -> b: module imports module"`` for each import between floors the table forbids."""
    bad = []
    for module, imported in sorted(import_graph(layer, root).items()):
        src = floor_of(module, layer, root)
        for name in sorted(imported):
            dst = floor_of(name, layer, root)
            if src == dst or dst is None:
                continue
            if src is None or dst not in ALLOWED[layer].get(src, set()):
                bad.append(f"{src} -> {dst}: {module} imports {name}")
    return bad


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_the_floor_table_points_down_with_no_circle(layer):
    """Each floor may import only floors listed before it: the table itself has no circle."""
    table = ALLOWED[layer]
    order = list(table)
    for floor, allowed in table.items():
        assert allowed <= set(order[: order.index(floor)]), (floor, allowed)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_every_floor_is_in_the_table(layer):
    folders = {p.name for p in (ROOT / layer).iterdir() if (p / "__init__.py").is_file()}
    tops = {p.stem for p in (ROOT / layer).glob("*.py")} - {"__init__"}
    if layer == "sims":
        tops -= {"sosd_toy"}
        assert {"science", "sosd_toy"} <= set(ALLOWED[layer])
    else:
        assert len(tops - {"__main__"}) <= 6, tops  # issue 39: at most 6 top-level modules
    assert folders | (tops if layer == "llm_validation" else set()) <= set(ALLOWED[layer])


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_floors_import_only_what_the_table_allows(layer):
    assert floor_violations(layer) == []


def _plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_upward_import_is_found(tmp_path):
    """A data module importing the trainer, and sims plumbing importing science, are caught."""
    _plant(tmp_path, {
        "llm_validation/__init__.py": "",
        "llm_validation/config.py": "from llm_validation.data import records\n",
        "llm_validation/data/__init__.py": "",
        "llm_validation/data/records.py": "import json\n",
        "llm_validation/data/corpus.py": "from llm_validation.data.records import x\n",
        "llm_validation/train/__init__.py": "",
        "llm_validation/train/trainer.py": "from ..data.records import x\nfrom ..config import y\n",
        "sims/__init__.py": "",
        "sims/entropy.py": "from sims.runtime.io import write_json\n",
        "sims/runtime/__init__.py": "",
        "sims/runtime/io.py": "from .errors import UsageError\n",
        "sims/runtime/errors.py": "",
    })  # fmt: skip
    assert floor_violations("llm_validation", tmp_path) == []
    assert floor_violations("sims", tmp_path) == []
    (tmp_path / "llm_validation/data/corpus.py").write_text(
        "def f():\n    from ..train import trainer\n"
    )
    (tmp_path / "sims/runtime/io.py").write_text("from .errors import U\nfrom .. import entropy\n")
    assert floor_violations("llm_validation", tmp_path) == [
        "data -> train: llm_validation.data.corpus imports llm_validation.train.trainer"
    ]
    assert floor_violations("sims", tmp_path) == [
        "runtime -> science: sims.runtime.io imports sims.entropy"
    ]
    (tmp_path / "llm_validation/data/corpus.py").write_text("import llm_validation.config\n")
    assert floor_violations("llm_validation", tmp_path) == [
        "data -> config: llm_validation.data.corpus imports llm_validation.config"
    ]
    (tmp_path / "llm_validation/data/corpus.py").write_text("from llm_validation import newfloor\n")
    (tmp_path / "llm_validation/newfloor.py").write_text("")
    assert floor_violations("llm_validation", tmp_path) == [
        "data -> newfloor: llm_validation.data.corpus imports llm_validation.newfloor"
    ]
