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
        "    import llm_validation.data as d\n"
        "except ImportError:\n"
        "    pass\n"
        "from .. import theory\n"  # sims.theory: a sibling module, not the layer
        "from ..sub import mod\n"
    )
    found = violations("sims", tmp_path)
    assert [f.split(" imports ")[1] for f in found] == [
        "theory.sam_saddle",
        "figures.fig01_linear_attention",
        "llm_validation.data",
    ]
    assert imported_modules("from .. import theory\n", "sims.sub.mod", False) == [(1, "sims")]
