import numpy as np
import pytest

from sims.markov.__main__ import main
from sims.markov.beyond import (
    entropies,
    minimal_uniformity,
    minimal_uniformity_seeds,
    ode_uniformity,
    paired_gains,
)
from sims.markov.experiments import minimal_exp, reseed


def test_cli_ode_writes_result(tmp_path, capsys):
    out = tmp_path / "ode.nc"
    assert main(["ode", "--T", "8", "--t-max", "500", "--out", str(out)]) == 0
    assert out.exists() and "stage times" in capsys.readouterr().out


def test_cli_train_quick(tmp_path, capsys):
    assert (
        main(
            [
                "train",
                "--scale",
                "quick",
                "--no-progress",
                "--steps",
                "3",
                "--out",
                str(tmp_path / "r.nc"),
            ]
        )
        == 0
    )
    assert "pattern times" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--scale", "quick", "--scheduler", "cosine"],
        ["train", "--scale", "quick", "--u", "-1"],
        ["ode", "--m", "-2"],
    ],
)
def test_cli_bad_values_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


def test_cli_usage_error_exits_2():
    with pytest.raises(SystemExit) as e:
        main(["nonsense"])
    assert e.value.code == 2


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
    assert 0 < int(ds.n_selected.sel(k=2)) < 64
    with pytest.raises(ValueError, match="online"):
        minimal_uniformity(minimal_exp("quick", online=True))
    with pytest.raises(ValueError, match="sam_rho"):
        minimal_uniformity(exp, sam_rho=(0.05, -1.0))
    with pytest.raises(ValueError, match="n_clusters"):
        minimal_uniformity(exp, n_clusters=1)
    with pytest.raises(ValueError, match="n_clusters"):
        minimal_uniformity(exp, n_clusters=2.5)


def test_more_clusters_select_a_smaller_harder_set():
    ds, runs = minimal_uniformity(minimal_exp("quick"), sam_rho=(), n_clusters=(2, 4))
    assert list(ds.run.values) == [
        "adamw",
        "upsample_hard",
        "upsample_random",
        "upsample_hard_k4",
        "upsample_random_k4",
    ]
    n2, n4 = (int(ds.n_selected.sel(k=k)) for k in (2, 4))
    assert 0 < n4 <= n2
    assert float(ds.hard_cluster_mean_loss.sel(k=4)) >= float(ds.hard_cluster_mean_loss.sel(k=2))


def test_uniformity_over_seeds_is_paired():
    exp = minimal_exp("quick")
    ds = minimal_uniformity_seeds(exp, seeds=[3, 4], workers=1, sam_rho=(0.05, 0.2))
    assert ds.sizes["seed"] == 2 and "sam_0.2" in ds.run.values
    # seed 3 of the sweep is exactly the single-seed function on the reseeded config
    one, _ = minimal_uniformity(reseed(exp, 3), sam_rho=(0.05, 0.2), seed=3)
    np.testing.assert_array_equal(ds.pattern_time.sel(seed=3), one.pattern_time)
    np.testing.assert_allclose(ds.final_excess.sel(seed=3), one.final_excess, rtol=1e-12)
    np.testing.assert_array_equal(ds.n_selected.sel(seed=3), one.n_selected)
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
