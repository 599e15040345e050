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


def _ds(x):
    import xarray as xr

    return xr.Dataset({"v": ((), float(x) ** 2)}, attrs={"x": x})


class _Crash(BaseException):
    """Stands for a kill or Ctrl-C (not an ``Exception``)."""


def test_store_resumes_after_a_crash(tmp_path):
    from sims.parallel import JobStore

    store = JobStore(tmp_path / "parts")
    calls, crash = [], [True]

    def flaky(x):
        calls.append(x)
        if x == 3 and crash[0]:
            raise _Crash  # the sweep dies at the third job
        return _ds(x)

    with pytest.raises(_Crash):
        pmap(flaky, [1, 2, 3, 4], workers=1, store=store)
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        store.path(x).name for x in (1, 2)
    )
    calls.clear()
    crash[0] = False
    out = pmap(flaky, [1, 2, 3, 4], workers=1, store=store)
    assert calls == [3, 4]  # only the unfinished jobs ran again
    assert [float(d.v) for d in out] == [1.0, 4.0, 9.0, 16.0]
    assert out[0].attrs["x"] == 1  # loaded back from disk
    store.clear()
    assert not store.directory.exists()


def test_store_keeps_only_datasets(tmp_path):
    from sims.parallel import JobStore

    with pytest.raises(TypeError, match="xarray.Dataset"):
        pmap(abs, [-2], workers=1, store=JobStore(tmp_path))
