import pytest

from sims.linear_attention.__main__ import main


def test_help_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "--optimizer" in capsys.readouterr().out
    assert main(["--runs", "0"]) == 2
    assert "`n_runs` must be an int >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--optimizer", "adam"])
    assert exc.value.code == 2


def test_tiny_run_saves_netcdf(tmp_path, capsys):
    out = tmp_path / "r.nc"
    args = "--optimizer sam --runs 2 --steps 60 --P 200 --d 2 --heads 2 --proxy-steps 30"
    rc = main([*args.split(), "--no-progress", "--out", str(out)])
    assert rc == 0 and out.exists()
    assert '"median_test_loss"' in capsys.readouterr().out
