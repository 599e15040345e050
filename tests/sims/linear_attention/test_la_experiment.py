"""The paired Figure 1 pipeline on a tiny configuration, checked against its own curves.

Every recorded quantity is recomputed here from first principles (the per-step curves with
``log_every=1``, numpy statistics): drop times on the *test* loss, learning times, horizon
statistics, feature counts, the lr-matched control and the paired starts.
"""

import numpy as np
import pytest

from sims.linear_attention.experiment import (
    METHOD_NAMES,
    Figure1Config,
    ordering_window,
    run_figure1,
    summarize,
)
from sims.linear_attention.measure import learning_times, loss_drop_times

CFG = Figure1Config(d=2, n_heads=2, n_examples=600, num_steps=901, paper_steps=301, n_runs=3,
                    learning_rate=0.05, init_scale=0.1, rho=2e-3, log_every=1,
                    methods=METHOD_NAMES)  # fmt: skip


@pytest.fixture(scope="module")
def ds():
    out = run_figure1(CFG)
    assert out.attrs["status"] == "success", out.attrs["messages"]
    return out


@pytest.mark.slow
def test_times_are_first_passages_of_the_test_curves(ds):
    mids = 0.5 * (ds.saddle_level.values[:-1] + ds.saddle_level.values[1:])
    for m in ds.method.values:
        te = ds.test_loss.sel({"method": m}).values
        np.testing.assert_array_equal(ds.drop_time.sel({"method": m}).values,
                                      loss_drop_times(te, ds.saddle_level.values))
        comp = ds.component.sel({"method": m}).values
        np.testing.assert_array_equal(
            ds.learning_time.sel({"method": m}).values,
            learning_times(comp, ds.fixed_point_component.values, fraction=CFG.fraction))
        lt = ds.learning_time.sel({"method": m}).values
        assert np.all(np.isfinite(lt)) or m == "sam_headwise"
    # GD + upsampling's *training* loss is usage-weighted (larger); drop times use the test loss
    tr = ds.train_loss.sel({"method": "gd_upsample"}).values
    te = ds.test_loss.sel({"method": "gd_upsample"}).values
    assert tr[:, 0].mean() > 1.1 * te[:, 0].mean()
    assert not np.array_equal(loss_drop_times(tr, ds.saddle_level.values),
                              ds.drop_time.sel({"method": "gd_upsample"}).values)
    assert mids.size == CFG.d


@pytest.mark.slow
def test_paired_starts_and_controls(ds):
    first = ds.test_loss.values[:, :, 0]  # every method starts from the same weights and data
    np.testing.assert_allclose(first, first[:1].repeat(first.shape[0], 0), rtol=1e-13)
    lr = ds.learning_rate.sel({"method": "gd_lr_matched"}).values
    boost = ds.sel_sigma_ratio.values.mean(1)
    np.testing.assert_allclose(lr, CFG.learning_rate * boost, rtol=1e-12)
    np.testing.assert_allclose(ds.sel_boost.values, ds.sel_sigma_ratio.values, rtol=1e-10)
    # SAM at ρ > 0 moves away from GD
    assert np.max(np.abs(ds.test_loss.sel({"method": "sam"}).values
                         - ds.test_loss.sel({"method": "gd"}).values)) > 1e-4


@pytest.mark.slow
def test_summary_statistics_match_numpy(ds):
    s = summarize(ds)
    for i, m in enumerate(ds.method.values):
        for j, h in enumerate(("paper", "long")):
            step = int(ds.horizon_step.values[j])
            x = ds.test_loss.values[i, :, step - 1]
            np.testing.assert_allclose(ds.test_loss_at.values[i, :, j], x, rtol=0)
            st = s[str(m)][h]["test_loss"]
            assert st["median"] == pytest.approx(np.median(x))
            assert st["mean"] == pytest.approx(np.mean(x))
            assert st["q25"] == pytest.approx(np.quantile(x, 0.25))
            n = np.sum(ds.learning_time.values[i] < step, axis=1)
            assert s[str(m)][h]["runs_with_n_features"] == np.bincount(n, minlength=3).tolist()
    win = ordering_window(ds)
    med = np.median(ds.test_loss.values, axis=1)
    below = med[list(ds.method.values).index("sam")] < med[0]
    inside = np.zeros_like(below)
    for a, b in win["sam"]:
        inside |= (ds.step.values >= a) & (ds.step.values <= b)
    np.testing.assert_array_equal(inside, below)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="`paper_steps` .* must not exceed `num_steps`"):
        Figure1Config(num_steps=100, paper_steps=200, log_every=1)
    with pytest.raises(ValueError, match="`log_every` \\(7\\) must divide"):
        Figure1Config(num_steps=101, paper_steps=51, log_every=7)
    with pytest.raises(ValueError, match="`methods` must be a non-empty subset"):
        Figure1Config(methods=("adam",))
    with pytest.raises(ValueError, match="`cluster_features` must be one of"):
        Figure1Config(cluster_features="ranks")


def test_format_summary_prints_one_row_per_method_when_the_horizons_coincide():
    """The paper setting has paper_steps == num_steps: the table said everything twice."""
    from sims.linear_attention.experiment import format_summary

    row = {"runs_with_n_features": [0, 1], "entropy_all_features": {"n": 0},
           "test_loss": {"median": 0.2, "mean": 0.3, "q25": 0.1, "q75": 0.4, "n": 2}}  # fmt: skip
    summary = {"horizons": {"paper": 11, "long": 11}, "gd": {"paper": row, "long": row},
               "sam": {"paper": row, "long": row}}  # fmt: skip
    lines = format_summary(summary).splitlines()
    assert [ln.split()[:2] for ln in lines[2:]] == [["gd", "11"], ["sam", "11"]]
    summary["horizons"]["long"] = 21
    lines = format_summary(summary).splitlines()
    assert [ln.split()[:2] for ln in lines[2:6]] == [["gd", "11"], ["gd", "21"], ["sam", "11"],
                                                     ["sam", "21"]]  # fmt: skip


def test_upsampling_study_predictions_follow_the_ansatz_on_its_own_numbers():
    """The study's predictions recomputed from its stored GD times, boosts and effective starts
    with the closed forms written out (H(T/r) − H(T); the weighted ansatz GD time)."""
    import dataclasses

    from sims.linear_attention.study import StudyConfig, run_upsampling_study

    base = dataclasses.replace(CFG, methods=("gd", "gd_upsample"), log_every=1)
    ds = run_upsampling_study(StudyConfig(base=base, selections=("hard", "random"),
                                          lr_control=False))  # fmt: skip
    assert ds.attrs["status"] == "success"
    lt_gd = ds.learning_time.sel(run_kind="gd").values
    for s in ds.selection.values:
        r = ds.sigma_ratio.sel(selection=s).values
        t = lt_gd / r
        p, q = t / t.sum(1, keepdims=True), lt_gd / lt_gd.sum(1, keepdims=True)
        want = -(p * np.log(p)).sum(1) + (q * np.log(q)).sum(1)
        np.testing.assert_allclose(ds.predicted_entropy_change_boost.sel(selection=s), want,
                                   rtol=1e-12)  # fmt: skip
        np.testing.assert_array_equal(ds.condition_met.sel(selection=s),
                                      np.all(np.diff(r, axis=1) >= -0.005 * r[:, 1:], axis=1))
    # GD runs through GD's own program here (no SAM in the study): the same trajectory as the
    # Figure 1 pipeline's GD
    fig = run_figure1(dataclasses.replace(base, methods=("gd",)))
    np.testing.assert_array_equal(lt_gd, fig.learning_time.sel(method="gd").values.squeeze())


def test_each_run_gets_its_own_initialization_and_its_own_proxy_checkpoints():
    """Run ``r`` starts from the ``r``-th split key, and its proxy losses are its own GD run's.

    Independent check of the proxy: the mean over examples of the per-example losses (numpy,
    from the checkpoint matrices) equals GD's recorded train loss at that step (JAX, from the
    dataset moments), run by run; the runs are built on two threads as ``run_figure1`` does.
    """
    from concurrent.futures import ThreadPoolExecutor

    import jax

    from sims.linear_attention.experiment import (
        PAPER_METHODS,
        _proxy_losses,
        _train_method,
        prepare_runs,
    )
    from sims.linear_attention.models import init_params

    cfg = Figure1Config(d=2, n_heads=2, n_examples=600, num_steps=301, paper_steps=301,
                        n_runs=3, learning_rate=0.05, init_scale=0.1, log_every=1,
                        methods=PAPER_METHODS)  # fmt: skip
    with ThreadPoolExecutor(max_workers=2) as pool:
        prep = prepare_runs(cfg, pool=pool)
        gd = _train_method(prep, "gd", prep.moments)
        losses = _proxy_losses(prep, gd, pool=pool)
    keys = jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.n_runs)
    for r in range(cfg.n_runs):
        want = init_params(keys[r], cfg.d, cfg.n_heads, rank=cfg.rank, init_scale=cfg.init_scale)
        for got, w in zip(prep.params0, want, strict=True):
            np.testing.assert_array_equal(np.asarray(got)[r], np.asarray(w))
    assert not np.allclose(prep.params0.k[0], prep.params0.k[1])
    steps = cfg.checkpoint_steps()
    assert losses.shape == (cfg.n_runs, cfg.n_examples, steps.size)
    train = gd.ds.train_loss.sel(step=steps).values  # (R, K)
    np.testing.assert_allclose(losses.mean(axis=1), train, rtol=1e-10)
    assert np.ptp(train[:, -1]) > 1e-3  # the runs differ, so a run's checkpoints are its own


# ----------------------------------------------------------------------------- interrupt, resume


def test_an_interrupted_run_keeps_finished_methods_and_resumes_to_the_same_result(
    ds, tmp_path, monkeypatch
):
    """Ctrl-C in one method: the finished ones stay on disk; the rerun trains only the rest.

    The resumed result equals the uninterrupted run (``ds``) exactly.
    """
    from sims.linear_attention import experiment as E

    real = E._train_method
    trained = []

    def interrupted(prep, name, *a, **k):
        if name == "gd_upsample":  # after GD (the selection needs it), in GD's line
            raise KeyboardInterrupt
        trained.append(name)
        return real(prep, name, *a, **k)

    monkeypatch.setattr(E, "_train_method", interrupted)
    store = tmp_path / "figure1.parts"
    with pytest.raises(KeyboardInterrupt, match=r"methods kept in .*figure1\.parts"):
        run_figure1(CFG, store=store)
    kept = {p.stem for p in store.glob("*.pkl")}
    assert "gd" in kept and "gd_upsample" not in kept and kept <= set(trained)
    trained.clear()
    monkeypatch.setattr(E, "_train_method", lambda prep, name, *a, **k: (
        trained.append(name), real(prep, name, *a, **k))[1])
    again = run_figure1(CFG, store=store)
    assert not set(trained) & kept and "gd_upsample" in trained
    for v in ds.data_vars:
        np.testing.assert_array_equal(again[v].values, ds[v].values, err_msg=v)
    # another configuration never reads these files
    other = E._MethodStore(store, Figure1Config(**{**CFG.__dict__, "seed": CFG.seed + 1}))
    assert other.get("gd") is None


def test_ctrl_c_on_figure1_acts_within_seconds_while_a_training_thread_is_busy(tmp_path):
    """A background training that would run 60 s more does not delay the exit (exit 130)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    code = f"""
import dataclasses, time
from sims.runtime.cli import run_cli
import sims.linear_attention.experiment as E
from sims.linear_attention.products import ensure_figure1
real = E._train_method
def slow(prep, name, *a, **k):
    if name == "sam":
        time.sleep(60)  # stands for a long XLA call that ignores signals
    return real(prep, name, *a, **k)
E._train_method = slow
cfg = E.Figure1Config(**{dict(CFG.__dict__)!r})
run_cli(lambda argv: ensure_figure1({str(tmp_path)!r}, config=cfg) and 0, prog="fig1")
"""
    env = dict(os.environ, PYTHONPATH=str(repo), JAX_ENABLE_X64="1")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    gd = tmp_path / "linear_attention" / "figure1.parts" / "gd.pkl"
    t0 = time.monotonic()
    while not gd.exists() and time.monotonic() - t0 < 120 and proc.poll() is None:
        time.sleep(0.1)
    assert gd.exists(), proc.communicate()[1][-2000:] if proc.poll() is not None else ""
    proc.send_signal(signal.SIGINT)
    t1 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t1 < 5, err
    assert proc.returncode == 130, err
    assert "methods kept in" in err and "rerun the same command to resume" in err
    assert gd.exists() and not (tmp_path / "linear_attention" / "figure1.nc").exists()
