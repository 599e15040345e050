"""Resuming a sweep on a process pool of 2 workers: results are keyed by item, not by position.

``test_parallel.py`` resumes only with one worker (in-process), where the jobs left to run are
computed in order and a mix-up of "position among the jobs left" with "position among all
items" cannot show. Here half of the items are saved before the rerun, in a pattern that makes
every left job's position differ from its item's, and the rest run on a 2-process pool.
"""

import os

import pytest

pytest.importorskip("xarray")

from sims.runtime.parallel import JobStore, pmap  # noqa: E402
from tests.sims.parallel_jobs import counted_square, markers  # noqa: E402


def test_process_pool_resume_puts_each_result_at_its_item(tmp_path):
    folder = tmp_path / "markers"
    folder.mkdir()
    (folder / "release").touch()  # no job waits
    store = JobStore(tmp_path / "parts")
    items = [(str(folder), float(x), 0.0) for x in range(8)]
    done_before = [items[i] for i in (0, 2, 3, 6)]  # left to run: items 1, 4, 5, 7
    pmap(counted_square, done_before, workers=1, store=store)
    assert sorted(markers(folder)) == [0.0, 2.0, 3.0, 6.0]
    for p in folder.iterdir():
        if p.name != "release":
            p.unlink()

    out = pmap(counted_square, items, workers=2, store=store, executor="processes")

    assert [float(d.v) for d in out] == [float(x) ** 2 for x in range(8)]  # each at its item
    ran = markers(folder)
    assert sorted(ran) == [1.0, 4.0, 5.0, 7.0]  # only the unfinished items, once each
    assert all(len(pids) == 1 for pids in ran.values())
    assert {pid for pids in ran.values() for pid in pids} - {os.getpid()}  # on the pool
    for x, item in enumerate(items):  # and each item's file holds that item's result
        assert float(store.load(item).v) == float(x) ** 2
    again = pmap(counted_square, items, workers=2, store=store, executor="processes")
    assert [float(d.v) for d in again] == [float(x) ** 2 for x in range(8)]
    assert sorted(markers(folder)) == [1.0, 4.0, 5.0, 7.0]  # a full store: nothing runs
