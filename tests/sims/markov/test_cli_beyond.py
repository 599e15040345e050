import numpy as np
import pytest

from sims.markov.__main__ import main
from sims.markov.beyond import entropies, minimal_uniformity, ode_uniformity
from sims.markov.experiments import minimal_exp


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
    assert set(ds.run.values) == {"adamw", "sam", "upsample_hard", "upsample_random"}
    assert 0 < ds.attrs["n_selected"] < 64
    with pytest.raises(ValueError, match="online"):
        minimal_uniformity(minimal_exp("quick", online=True))
