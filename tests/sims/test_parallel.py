"""sims.parallel.pmap: same results as a serial map, in order; errors name the failing item."""

import math

import pytest

from sims.parallel import default_workers, pmap


def test_serial_and_process_pool_agree_in_order():
    items = [5, 0, 3, 12, 1]
    expect = [math.factorial(x) for x in items]
    assert pmap(math.factorial, items, workers=1) == expect
    assert pmap(math.factorial, items, workers=2) == expect  # spawn pool, completion order varies


def test_failure_names_the_item():
    with pytest.raises(RuntimeError, match=r"job 1 \(-1\) failed.*ValueError"):
        pmap(math.sqrt, [4.0, -1, 9.0], workers=2)
    with pytest.raises(ValueError, match="math domain"):  # serial path: the original error
        pmap(math.sqrt, [-1.0], workers=1)


def test_workers_validation_and_env(monkeypatch):
    with pytest.raises(ValueError, match="`workers`"):
        pmap(abs, [1], workers=0)
    monkeypatch.setenv("SBT_WORKERS", "3")
    assert default_workers(10) == 3
    assert default_workers(2) == 2
    monkeypatch.setenv("SBT_WORKERS", "two")
    with pytest.raises(ValueError, match="SBT_WORKERS"):
        default_workers(4)
