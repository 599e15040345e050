"""Optional extras: the one-line messages that replace import tracebacks."""

import pytest

from sims.runtime.extras import (
    EXTRAS,
    MissingExtraError,
    exit_on_missing_extra,
    extra_for_module,
    is_available,
    require,
)


@pytest.mark.parametrize(
    ("module", "extra"),
    [("jax", "jax"), ("jaxlib", "jax"), ("optax.contrib", "jax"), ("torch", "torch"),
     ("numba", "torch"), ("transformers", "llm"), ("peft", "llm"), ("gguf", "models"),
     ("numpy", None), ("nonexistent_pkg", None)],
)  # fmt: skip
def test_extra_for_module(module, extra):
    assert extra_for_module(module) == extra


def test_require_names_the_extra_and_the_install_command():
    with pytest.raises(MissingExtraError, match=r"needs the `torch` extra \(missing: no_such_mod"):
        require("torch", "no_such_mod", what="the Markov trainer")
    with pytest.raises(MissingExtraError, match=r"pip install torch==2\.13\.0 && pip install -e"):
        require("torch", "no_such_mod")
    require("core")  # the core install is always there
    assert is_available("core")
    with pytest.raises(ValueError, match="unknown extra 'tensorflow'"):
        require("tensorflow")


def test_torch_extras_install_the_cpu_wheel_first():
    # an unpinned torch pulls several GB of CUDA packages: every torch-based extra pins it first
    for name in ("torch", "llm", "models"):
        assert EXTRAS[name].install.startswith("pip install torch==2.13.0 && ")
    assert "torch" not in EXTRAS["jax"].install


def test_exit_on_missing_extra_gives_exit_2_and_one_line(capsys):
    with pytest.raises(SystemExit) as exc, exit_on_missing_extra("python -m demo"):
        raise ModuleNotFoundError("No module named 'jax'", name="jax")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "python -m demo needs the `jax` extra" in err
    with pytest.raises(ModuleNotFoundError), exit_on_missing_extra("x"):  # not an extra: re-raised
        raise ModuleNotFoundError("No module named 'foo'", name="foo")
