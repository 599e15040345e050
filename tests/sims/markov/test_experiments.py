"""The seed-004 figure runs shared by ``figures`` and the GPU campaign (sims.markov.experiments)."""

import numpy as np
import pytest
import torch
import xarray as xr

from sims.markov import experiments as X
from sims.runtime.io import read_netcdf


def test_fig5_summary_matches_its_curves(tmp_path):
    """Best step / loss and the stage counts are read off the saved curves consistently."""
    ds = X.FIGURE_RUNS["markov_fig5"].run(tmp_path, "quick")
    assert ds.attrs["kl_to"].startswith("restricted ground truths")
    assert ds["size"].values.tolist() == list(X.FIG5_SIZES["quick"])
    for n in ds["size"].values:
        r = ds.sel(size=n).isel(seed=0)
        i = int(np.argmin(r.excess_loss.values))
        assert int(r.best_step) == int(r.step[i])
        assert float(r.best_excess) == float(r.excess_loss[i])
        assert 0 <= int(r.n_stages_at_best) <= 3 and 0 <= int(r.n_stages) <= 3
        assert int(r.closest_at_best) == int(np.argmin(r.kl_context.values[i])) + 1
        assert float(r.kl_floor[0]) > 0 and float(r.kl_floor[-1]) == 0.0
    saved = tmp_path / "markov" / "quick" / "fig5_datasize.nc"
    assert read_netcdf(saved).attrs["meta"]["config"] == {"figure": "markov_fig5", "scale": "quick"}
    assert not saved.with_suffix(".parts").exists()  # the job store is removed once written


def _toy(value: float) -> xr.Dataset:
    return xr.Dataset({"x": ("i", np.full(3, value))})


def test_figure_run_resumes_from_its_job_store_and_loads_without_computing(tmp_path):
    calls = []

    def sweep(scale, *, store=None, device=None):
        calls.append((scale, device, store.directory.name))
        if store.load(("job", 1)) is None:  # a finished job of an interrupted sweep is reused
            store.save(("job", 1), _toy(1.0))
        return _toy(float(store.load(("job", 1)).x[0]) + len(calls))

    run = X.FigureRun("toy", "markov/toy.nc", sweep)
    path = tmp_path / "markov" / "paper" / "toy.nc"
    assert run.path(tmp_path, "paper") == path
    parts = path.with_suffix(".parts")
    # an interrupted sweep left job 1 in the store: the rerun reuses it and removes the store
    from sims.runtime.parallel import JobStore

    JobStore(parts).save(("job", 1), _toy(5.0))
    ds = run.run(tmp_path, "paper", device="cpu")
    assert calls == [("paper", "cpu", "toy.parts")] and float(ds.x[0]) == 6.0
    assert not parts.exists() and ds.attrs["meta"]["config"] == {"figure": "toy", "scale": "paper"}
    assert float(run.run(tmp_path, "paper").x[0]) == 6.0 and len(calls) == 1  # loaded
    ds = run.run(tmp_path, "paper", recompute=True)  # recompute clears the store first
    assert len(calls) == 2 and float(ds.x[0]) == 1.0 + 2


def test_result_path_by_scale_and_bad_scale():
    assert X.result_path("markov/a.nc", "r", "cpu").as_posix() == "r/markov/a.nc"
    assert X.result_path("markov/a.nc", "r", "quick").as_posix() == "r/markov/quick/a.nc"
    with pytest.raises(ValueError, match="`scale`='huge'"):
        X.result_path("markov/a.nc", "r", "huge")


@pytest.mark.parametrize("name", sorted(X.FIGURE_RUNS))
def test_a_device_this_machine_lacks_is_refused_before_any_work(name, tmp_path, monkeypatch):
    import sims.markov.train as T

    def no_work(*a, **k):
        raise AssertionError("work started before the device was checked")

    monkeypatch.setattr(T, "train", no_work)
    monkeypatch.setattr(X, "train_with_references", no_work)
    with pytest.raises(ValueError, match="not a torch device"):
        X.FIGURE_RUNS[name].run(tmp_path, "paper", device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no usable CUDA device"):
            X.FIGURE_RUNS[name].compute("paper", device="cuda")
    assert not list(tmp_path.rglob("*.nc"))
