import numpy as np
import pytest

from sims.markov.beyond import (
    entropies,
    minimal_uniformity,
    minimal_uniformity_seeds,
    ode_uniformity,
    paired_gains,
)
from sims.markov.experiments import minimal_exp, reseed


def test_entropies():
    h_t, h_d = entropies([1.0, 2.0, 3.0])
    assert np.isclose(h_t, -sum(p * np.log(p) for p in (1 / 6, 2 / 6, 3 / 6)))
    assert np.isclose(h_d, np.log(3))  # durations 1, 1, 1
    assert np.isnan(entropies([1.0, np.inf, 2.0])[0])


def test_ode_uniformity_small():
    ds = ode_uniformity(
        rhos=(0.0, 0.05), seeds=[0], lr=0.2, steps=3000, T=8, init_std=1e-3, record_every=10
    )
    assert ds.stage_time.shape == (2, 1, 3)
    assert np.all(np.isfinite(ds.stage_time.sel(rho=0.0)))


def test_minimal_uniformity_smoke():
    exp = minimal_exp("quick", record_example_losses=False)
    ds, runs = minimal_uniformity(exp)
    assert set(ds.run.values) == {"adamw", "sam_0.05", "upsample_hard", "upsample_random"}
    assert 0 < int(ds.n_selected.sel(k=2, target="loss")) < 64
    with pytest.raises(ValueError, match="online"):
        minimal_uniformity(minimal_exp("quick", online=True))
    with pytest.raises(ValueError, match="sam_rho"):
        minimal_uniformity(exp, sam_rho=(0.05, -1.0))
    with pytest.raises(ValueError, match="n_clusters"):
        minimal_uniformity(exp, n_clusters=1)
    with pytest.raises(ValueError, match="n_clusters"):
        minimal_uniformity(exp, n_clusters=2.5)
    with pytest.raises(ValueError, match="cluster_on"):
        minimal_uniformity(exp, cluster_on="gradient")


def test_selections_share_one_proxy_and_are_consistent():
    exp = minimal_exp("quick")
    ds, runs = minimal_uniformity(exp, sam_rho=(), n_clusters=(2, 4), cluster_on=("loss", "excess"))
    assert list(ds.run.values) == ["adamw"] + [
        f"upsample_{kind}{tag}"
        for tag in ("", "_k4", "_excess", "_k4_excess")
        for kind in ("hard", "random")
    ]
    # recompute the selection diagnostics independently from the proxy run
    from sims.markov.chain import MarkovChain, make_dataset
    from sims.selection import cluster_trajectories

    chain = MarkovChain(exp.chain, seed=exp.seed)
    data = make_dataset(chain, exp.train.n_train, exp.train.n_test)
    losses = runs["adamw"]["example_loss"].values.T
    lp = chain.log_probs(data.train)  # Bayes loss by hand, position by position
    w = exp.chain.w
    bayes = np.array(
        [-np.mean([lp[i, t, data.train[i, w + t]] for t in range(lp.shape[1])])
         for i in range(len(lp))]
    )  # fmt: skip
    np.testing.assert_allclose(chain.sequence_nll(data.train), bayes, rtol=1e-12)
    assert ds.attrs["bayes_loss_mean"] == pytest.approx(bayes.mean())
    for tgt, feats in (("loss", losses), ("excess", losses - bayes[:, None])):
        for k in (2, 4):
            hard = cluster_trajectories(feats, k, seed=0).hard_mask
            r = ds.sel(target=tgt, k=k)
            assert int(r.n_selected) == hard.sum() > 0
            assert float(r.hard_cluster_bayes_loss) == pytest.approx(bayes[hard].mean())
            assert float(r.hard_cluster_mean_loss) == pytest.approx(losses[hard].mean())


def test_uniformity_over_seeds_is_paired():
    exp = minimal_exp("quick")
    ds = minimal_uniformity_seeds(exp, seeds=[3, 4], workers=1, sam_rho=(0.05, 0.2))
    assert ds.sizes["seed"] == 2 and "sam_0.2" in ds.run.values
    # seed 3 of the sweep is exactly the single-seed function on the reseeded config
    one, _ = minimal_uniformity(reseed(exp, 3), sam_rho=(0.05, 0.2), seed=3)
    np.testing.assert_array_equal(ds.pattern_time.sel(seed=3), one.pattern_time)
    np.testing.assert_allclose(ds.final_excess.sel(seed=3), one.final_excess, rtol=1e-12)
    np.testing.assert_array_equal(ds.n_selected.sel(seed=3), one.n_selected)
    assert float(ds.bayes_loss_mean.sel(seed=3)) == one.attrs["bayes_loss_mean"]
    assert float(ds.bayes_loss_mean.sel(seed=4)) != one.attrs["bayes_loss_mean"]  # own chain
    np.testing.assert_array_equal(ds.gain_times.sel(run="adamw").fillna(0.0), 0.0)
    with pytest.raises(ValueError, match="seeds"):
        minimal_uniformity_seeds(exp, seeds=[])


def test_paired_gains_statistics():
    import xarray as xr

    g = np.array([[0.0, 0.1, -0.2], [0.0, 0.3, np.nan], [0.0, 0.2, 0.4]])  # (seed, run)
    ds = xr.Dataset({"gain_times": (("seed", "run"), g)}, coords={"run": ["a", "b", "c"]})
    out = paired_gains(ds)
    assert out["b"]["mean"] == pytest.approx(0.2) and out["b"]["sd"] == pytest.approx(0.1)
    assert (out["b"]["n_positive"], out["b"]["n"], out["b"]["n_seeds"]) == (3, 3, 3)
    assert (out["c"]["min"], out["c"]["max"], out["c"]["n"]) == (-0.2, 0.4, 2)
    assert out["c"]["n_positive"] == 1 and out["a"]["n_positive"] == 0
