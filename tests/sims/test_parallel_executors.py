"""Choosing the executor: specs, $SBT_EXECUTOR, --executor, SLURM settings, executor objects."""

import concurrent.futures as cf
import math

import pytest

from sims.runtime import executors
from sims.runtime.cli import UsageError
from sims.runtime.executors import ExecutorSpec, SlurmSettings, parse_executor, slurm_settings
from sims.runtime.extras import MissingExtraError
from sims.runtime.parallel import check_executor_env, pmap, use_executor


@pytest.fixture(autouse=True)
def _no_chosen_executor(monkeypatch):
    monkeypatch.delenv("SBT_EXECUTOR", raising=False)
    yield
    use_executor(None)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("nope", r"'nope' is not an executor; use processes, dask-local\[:N\]"),
        ("dask-local:0", "N must be a positive number of workers"),
        ("dask-local:two", "is not an executor"),
        ("dask://host", "is not an executor"),  # no port
        ("dask://host:99999", "port 99999 is not in 1-65535"),
        ("tcp://host:8786", "is not an executor"),
        ("", "is not an executor"),
    ],
)
def test_bad_specs_are_usage_errors(value, match):
    with pytest.raises(UsageError, match=match):
        parse_executor(value)


def test_specs_round_trip():
    for spec in ("processes", "dask-local", "dask-local:4", "dask://h.example:8786", "slurm"):
        assert str(parse_executor(spec)) == spec


def test_env_and_use_executor_precedence(monkeypatch):
    assert check_executor_env() == ExecutorSpec("processes")  # unset: the default
    monkeypatch.setenv("SBT_EXECUTOR", "dask-local:3")
    assert check_executor_env() == ExecutorSpec("dask-local", n_workers=3)
    use_executor("processes")  # a CLI's --executor wins over the environment
    assert check_executor_env() == ExecutorSpec("processes")
    use_executor(None)
    monkeypatch.setenv("SBT_EXECUTOR", "dask-locl:2")
    with pytest.raises(UsageError, match=r"SBT_EXECUTOR='dask-locl:2' is not an executor"):
        check_executor_env()
    with pytest.raises(UsageError, match="SBT_EXECUTOR="):  # pmap checks before any job runs
        pmap(abs, [1, 2], workers=1)


def test_cli_flag_is_one_line_and_exit_2(capsys):
    from figures.__main__ import main

    for argv in (["--executor", "dask-local:x", "--list"], ["--executor", "slurm:2"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "argument --executor:" in err and "not an executor" in err


def test_cli_checks_the_environment_before_any_work(monkeypatch, capsys, tmp_path):
    from figures.fig_markov_4 import main

    monkeypatch.setenv("SBT_EXECUTOR", "slurm")
    monkeypatch.setenv("SBT_SLURM_TIME", "soon")
    with pytest.raises(SystemExit) as exc:
        main(["--quick", "--out", str(tmp_path / "o"), "--results", str(tmp_path / "r")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SBT_SLURM_TIME='soon'" in err
    assert not (tmp_path / "r").exists()  # nothing computed


def test_flag_sets_the_executor_of_the_process(monkeypatch):
    from sims.runtime.cli import ArgumentParser
    from sims.runtime.parallel import add_executor_argument

    p = ArgumentParser(prog="demo")
    add_executor_argument(p)
    assert p.parse_args([]).executor is None  # unset: processes, nothing chosen
    monkeypatch.setenv("SBT_EXECUTOR", "dask-local:2")
    assert p.parse_args([]).executor == ExecutorSpec("dask-local", n_workers=2)
    assert executors._chosen is None  # the environment is read by pmap itself
    assert p.parse_args(["--executor", "processes"]).executor == ExecutorSpec("processes")
    assert check_executor_env() == ExecutorSpec("processes")  # the flag beat the environment
    p.parse_args([])  # a later parse without the flag: the environment again
    assert check_executor_env() == ExecutorSpec("dask-local", n_workers=2)


def test_missing_cluster_extra_names_the_install_command(monkeypatch, capsys):
    import sims.runtime.extras

    real = sims.runtime.extras._found
    monkeypatch.setattr(sims.runtime.extras, "_found",
                        lambda m: m not in ("distributed", "submitit") and real(m))  # fmt: skip
    with pytest.raises(
        MissingExtraError, match=r'`cluster` extra .*pip install -e "\.\[cluster\]"'
    ):
        pmap(abs, [1], executor="dask-local:2")
    from figures.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["--executor", "slurm", "--list"])
    assert exc.value.code == 2 and "pip install -e" in capsys.readouterr().err


def test_slurm_settings_from_variables_and_a_file(tmp_path):
    assert slurm_settings({}) == SlurmSettings()
    cfg = tmp_path / "slurm.toml"
    cfg.write_text('partition = "gpu"\ntime = "1-02:30"\ngpus = 1\nsetup = ["module load cuda"]\n')
    s = slurm_settings({"SBT_SLURM_CONFIG": str(cfg), "SBT_SLURM_PARTITION": "cpu",
                        "SBT_SLURM_MEM_GB": "7.5", "SBT_SLURM_CPUS": "4"})  # fmt: skip
    assert (s.partition, s.time, s.gpus, s.mem_gb, s.cpus) == ("cpu", 1590, 1, 7.5, 4)
    p = s.parameters()
    assert p["slurm_partition"] == "cpu" and p["timeout_min"] == 1590 and p["mem_gb"] == 7.5
    assert p["cpus_per_task"] == 4 and p["gpus_per_node"] == 1
    assert p["slurm_setup"] == ["module load cuda"] and "slurm_qos" not in p
    assert slurm_settings({"SBT_SLURM_TIME": "00:00:30"}).time == 1  # rounded up to a minute
    assert slurm_settings({"SBT_SLURM_TIME": "45"}).time == 45


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"SBT_SLURM_TIME": "0"}, "SBT_SLURM_TIME='0' is not valid for the time limit"),
        ({"SBT_SLURM_CPUS": "-1"}, "SBT_SLURM_CPUS='-1'.*positive integer"),
        ({"SBT_SLURM_MEM_GB": "lots"}, "SBT_SLURM_MEM_GB='lots'"),
        ({"SBT_SLURM_CLUSTER": "pbs"}, "use slurm or local"),
        ({"SBT_SLURM_PARTITON": "cpu"}, "SBT_SLURM_PARTITON is not a setting; known: "),
        ({"SBT_SLURM_CONFIG": "/no/such/file.toml"}, "cannot be read as TOML"),
    ],
)
def test_bad_slurm_settings(env, match):
    with pytest.raises(UsageError, match=match):
        slurm_settings(env)


def test_unknown_key_in_the_slurm_file(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text("[slurm]\npartiton = 'cpu'\n")
    with pytest.raises(UsageError, match="unknown setting 'partiton'; known: partition"):
        slurm_settings({"SBT_SLURM_CONFIG": str(cfg)})


def test_any_concurrent_futures_executor_and_nested_pmap():
    import os

    with cf.ThreadPoolExecutor(2) as ex:
        assert pmap(math.factorial, [5, 0, 3], executor=ex) == [120, 1, 6]
        # a pmap inside a job runs in the job's process (here: this one), not in a new pool
        assert pmap(_nested_pids, [2, 3], executor=ex) == [[os.getpid()] * 2, [os.getpid()] * 3]
        with pytest.raises(RuntimeError, match=r"job 1 \(-1\) failed.*ValueError"):
            pmap(math.sqrt, [4.0, -1], executor=ex)
        assert not ex._shutdown  # an executor passed in code is the caller's to shut down
    with pytest.raises(TypeError, match="`executor` must be a spec string"):
        pmap(abs, [1], executor=3)


def _pid(_):
    import os

    return os.getpid()


def _nested_pids(n):
    return pmap(_pid, range(n), workers=2, executor="processes")


def test_the_source_check_compares_the_content_hash_not_the_folder(monkeypatch):
    """Two checkouts of one commit pass; one folder with a changed file does not.

    The hash and the folder usually change together (another checkout); each is changed alone
    here, in the per-job check and in the check of a running cluster's workers.
    """
    mine = ("a" * 16, "/repo/one")
    monkeypatch.setattr(executors, "source_fingerprint", lambda: mine)
    executors.check_source(("a" * 16, "/elsewhere/copy"))  # same content, other folder: fine
    with pytest.raises(executors.SourceMismatch, match=f"source {'b' * 16} in /repo/one"):
        executors.check_source(("b" * 16, "/repo/one"))  # same folder, changed content

    import distributed

    class FakeClient:
        status = "running"
        workers: dict = {}

        def __init__(self, *a, **k):
            pass

        def wait_for_workers(self, n, timeout=None):
            pass

        def run(self, fn):
            return dict(FakeClient.workers)

        def close(self):
            pass

    monkeypatch.setattr(distributed, "Client", FakeClient)
    monkeypatch.setattr(executors, "_DASK", {})
    spec = parse_executor("dask://h.example:8786")
    FakeClient.workers = {"tcp://w1": ("a" * 16, "/other/folder")}
    assert executors.check_executor(spec) == spec
    executors._DASK.clear()
    FakeClient.workers = {"tcp://w1": ("c" * 16, "/repo/one")}
    with pytest.raises(executors.SourceMismatch, match=f"worker tcp://w1 .*source {'c' * 16}"):
        executors.check_executor(spec)
