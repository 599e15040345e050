"""The confirmation's driver: plan, run and resume every job.

:func:`run_confirmation` runs the jobs of :mod:`.jobs`; ``--reuse`` finds an earlier run's
pre-trained models and proxies (:func:`check_reuse_folder`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import numpy as np

from llm_validation.experiments.confirm.analysis import (
    _aggregate,
    latest_learners,
    learning_times,
    matched_epochs,
)
from llm_validation.experiments.confirm.design import VARIANTS, ConfirmConfig, Variant
from llm_validation.experiments.confirm.jobs import (
    _corrupted,
    _examples,
    _job_finetune,
    _job_pretrain,
    _job_proxy,
    _selected,
    _threads,
)
from llm_validation.experiments.confirm.report import report

# ----------------------------------------------------------------------------- driver


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, flush=True)


def _cpu_now() -> float:
    """CPU seconds of this process and its finished children (the workers), user + system."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _available(variant: Variant) -> bool:
    if variant.needs is None:
        return True
    import importlib.util

    from llm_validation.train.trainer import _sims_optim

    if _sims_optim() is None:
        return False
    try:
        return importlib.util.find_spec(variant.needs) is not None
    except ImportError:
        return False


def run_confirmation(
    cfg: ConfirmConfig,
    out_dir: str | os.PathLike,
    *,
    quiet: bool = False,
    reuse_from: str | os.PathLike | None = None,
):
    """Run (or resume) the whole experiment; return the aggregate ``xarray.Dataset``.

    Writes ``out_dir/results.nc`` (with provenance) and ``out_dir/report.md``.

    Args:
        cfg: the experiment.
        out_dir: results folder (resumable).
        quiet: no progress output.
        reuse_from: a finished run's folder whose pre-trained models and proxy trajectories
            are reused (loaded from its job store, not recomputed), e.g. for the horizon check
            (same corpus and pre-training, other fine-tuning). Its corpus must equal the one
            ``cfg`` writes, and every reused job must be in its store (``ValueError`` if not).
    """
    from llm_validation.data.corpus import write_corpus
    from llm_validation.select.clustering import select_examples, usage_counts
    from llm_validation.train.trainer import schedule
    from sims.runtime.io import ensure_writable, provenance, write_netcdf
    from sims.runtime.parallel import JobStore, default_workers, pmap

    out = ensure_writable(out_dir, kind="dir", arg="out_dir")
    if reuse_from is not None:
        check_reuse_folder(reuse_from, out)  # before the corpus is written
    t_start = time.perf_counter()
    c_start = _cpu_now()
    load_start = os.getloadavg()
    cpu: dict[str, float] = {}  # CPU seconds per phase (1 thread per worker: idle-core time)
    job_cpu: dict = {}  # CPU seconds per job (benchmarks/bench_confirm.py estimates from them)
    variants = {v: VARIANTS[v] for v in cfg.variants if _available(VARIANTS[v])}
    skipped = [v for v in cfg.variants if v not in variants]
    if skipped:
        _say(f"skipping {skipped}: sims.optim (Muon/SAM family) is not available", quiet)
    # 1. corpus
    data = out / "data"
    if not (data / "MathInstruct.json").exists():
        write_corpus(
            data,
            n_train=cfg.n_train,
            n_test=cfg.n_test,
            n_pretrain=cfg.n_pretrain,
            n_heldout=cfg.n_heldout,
            seed=cfg.corpus_seed,
            noise_rate=cfg.noise_rate,
            levels=cfg.levels,
        )
    from llm_validation.data.records import split_train_val

    all_ex = _examples(data / "MathInstruct.json")
    train, _ = split_train_val(all_ex, val_fraction=0.05, seed=42)
    corrupted, levels = _corrupted(data / "MathInstruct.json")
    train_idx = np.array([e.index for e in train])
    from llm_validation.data.records import write_jsonl

    train_file = data / "train_split.jsonl"
    if not train_file.exists():
        write_jsonl(
            train_file,
            [{"instruction": e.instruction, "output": e.output, "source": e.source} for e in train],
        )
    heldout_file = str(data / "heldout.json") if cfg.n_heldout else None
    if heldout_file and not Path(heldout_file).exists():
        raise ValueError(
            f"{out} holds a corpus without a held-out split (written by an older version); "
            "start a fresh `out_dir`, or set `n_heldout=0`."
        )
    store = JobStore(out / "jobs")
    reuse, shared = _reused_run(reuse_from, out, data) if reuse_from else (None, store)
    workers = cfg.workers or default_workers(len(cfg.seeds) * len(variants))
    # 2. models: pre-train from scratch where asked
    pre_jobs = []
    for role, spec, pcfg in (
        ("target", cfg.target, cfg.target_pretrain),
        ("proxy", cfg.proxy, cfg.proxy_pretrain),
    ):
        if spec == "scratch":
            pre_jobs.append(
                {
                    "kind": "pretrain",
                    "role": role,
                    "cfg": pcfg,
                    "pretrain_file": str(data / "pretrain.json"),
                    "out": str(out / f"pretrain_{role}"),
                    "threads": _threads(min(workers, 2), cfg.threads),
                }
            )
    models = {"target": cfg.target, "proxy": cfg.proxy}
    if pre_jobs:
        _say(f"pre-training {[j['role'] for j in pre_jobs]} from scratch", quiet)
        pre_jobs = _in_reused_run(pre_jobs, out, reuse, shared)
        res = pmap(
            _job_pretrain,
            pre_jobs,
            workers=min(workers, len(pre_jobs)),
            store=shared,
            desc=None if quiet else "pretrain",
        )
        cpu["pretrain"] = sum(float(r.attrs.get("cpu_seconds", 0)) for r in res)
        for j, r in zip(pre_jobs, res, strict=True):
            models[j["role"]] = r.attrs["folder"]
            job_cpu[f"pretrain_{j['role']}"] = float(r.attrs.get("cpu_seconds", np.nan))
    # 3. proxies: one run per (seed, proxy kind), 15 checkpoints over one epoch
    kinds = sorted({_selected(v).proxy for v in variants.values() if _selected(v).setting != "ft"})
    proxy_jobs = [
        {
            "kind": "proxy",
            "seed": s,
            "proxy": kind,
            "cfg": cfg.proxy_train,
            "model": models["proxy" if kind == "small" else "target"],
            "train_file": str(train_file),
            "max_length": cfg.max_length,
            "lt_records": cfg.lt_records,
            "out": str(out / f"seed{s}" / f"proxy_{kind}"),
            "threads": _threads(workers, cfg.threads),
        }
        for s in cfg.seeds
        for kind in kinds
    ]
    trajs = {}
    if proxy_jobs:
        _say(f"proxy trajectories: {len(proxy_jobs)} runs", quiet)
        proxy_jobs = _in_reused_run(proxy_jobs, out, reuse, shared)
        res = pmap(
            _job_proxy,
            proxy_jobs,
            workers=min(workers, len(proxy_jobs)),
            store=shared,
            desc=None if quiet else "proxies",
        )
        cpu["proxies"] = sum(float(r.attrs.get("cpu_seconds", 0)) for r in res)
        job_cpu["proxy"] = [float(r.attrs.get("cpu_seconds", np.nan)) for r in res]
        trajs = {(j["seed"], j["proxy"]): r for j, r in zip(proxy_jobs, res, strict=True)}
    # 4. selections (cheap, here) and the probe sets
    src = np.array([e.source for e in train])
    sel_info: dict = {}
    ft_jobs = []
    for s in cfg.seeds:
        rng = np.random.default_rng(1000 + s)
        probes = np.sort(
            np.concatenate(
                [
                    rng.choice(
                        np.flatnonzero(src == name),
                        min(cfg.probes_per_source, int((src == name).sum())),
                        replace=False,
                    )
                    for name in sorted(set(src))
                ]
            )
        )

        def counts_of(v: Variant, vname: str, s: int = s) -> np.ndarray:
            if v.setting == "ft":
                return np.ones(len(train), np.int64)
            scfg = dataclasses.replace(
                cfg.selection, features=v.features, n_checkpoints=v.k, seed=s
            )
            sel = select_examples(trajs[(s, v.proxy)], scfg)
            if v.late_oracle:  # the same count, the latest learners (issue 36)
                tr = trajs[(s, v.proxy)]
                if "lt_loss" not in tr:
                    raise ValueError(
                        "`ft_up_late` needs the proxy's log-spaced losses: set `lt_records` > 0."
                    )
                late = latest_learners(
                    learning_times(tr["lt_step"].values, tr["lt_loss"].values),
                    int(sel["hard"].sum()),
                )
                sel = sel.assign(hard=("example", late))
            c = usage_counts(sel, v.setting, scfg.upsample_factor)
            if v.oracle_clean:
                c[corrupted[train_idx]] = 1
            sel_info[(s, vname)] = sel
            return c

        for vname, v in variants.items():
            counts = counts_of(v, vname)
            fcfg = dataclasses.replace(
                cfg.finetune, model=models["target"], seed=s, optimizer=v.optimizer
            )
            if v.match_steps is not None:  # the other variant's steps, same seed and proxy run
                other = counts_of(VARIANTS[v.match_steps], v.match_steps)
                steps = schedule(int(other.sum()), fcfg.batch_size, fcfg.epochs).total
                fcfg = dataclasses.replace(
                    fcfg, epochs=matched_epochs(steps, int(counts.sum()), fcfg.batch_size)
                )
            ft_jobs.append(
                {
                    "kind": "finetune",
                    "variant": vname,
                    "seed": s,
                    "cfg": fcfg,
                    "counts": counts.tolist(),
                    "probes": probes.tolist(),
                    "train_file": str(train_file),
                    "bench_dir": str(data / "dataset"),
                    "heldout_file": heldout_file,
                    "heldout_acc_per_source": cfg.heldout_acc_per_source,
                    "model": models["target"],
                    "max_length": cfg.max_length,
                    "max_new_tokens": cfg.max_new_tokens,
                    "eval_batch_size": cfg.eval_batch_size,
                    "n_records": cfg.n_records,
                    "execute": cfg.execute_programs,
                    "out": str(out / f"seed{s}" / vname),
                    "threads": _threads(workers, cfg.threads),
                }
            )
    ft_jobs.append(
        {
            "kind": "finetune",
            "variant": "pt",
            "seed": -1,
            "model": models["target"],
            "bench_dir": str(data / "dataset"),
            "heldout_file": heldout_file,
            "heldout_acc_per_source": cfg.heldout_acc_per_source,
            "max_length": cfg.max_length,
            "max_new_tokens": cfg.max_new_tokens,
            "eval_batch_size": cfg.eval_batch_size,
            "execute": cfg.execute_programs,
            "out": str(out / "pretrained"),
            "threads": _threads(workers, cfg.threads),
        }
    )
    _say(f"fine-tuning + evaluation: {len(ft_jobs)} runs on {workers} workers", quiet)
    res = pmap(
        _job_finetune, ft_jobs, workers=workers, store=store, desc=None if quiet else "finetune"
    )
    cpu["finetune"] = sum(float(r.attrs.get("cpu_seconds", 0)) for r in res)
    job_cpu["pt_eval"] = float(res[-1].attrs.get("cpu_seconds", np.nan))  # the last job: PT
    held_src = [e.source for e in _examples(heldout_file)] if heldout_file else []
    from llm_validation.experiments.confirm.analysis import benchmark_items

    ds = _aggregate(
        cfg,
        variants,
        ft_jobs,
        res,
        sel_info,
        trajs,
        train_idx,
        corrupted,
        levels,
        src,
        held_src,
        items=benchmark_items(data / "dataset"),
    )
    if (data / "contamination.json").exists():
        ds.attrs["contamination"] = (data / "contamination.json").read_text()
    ds.attrs["seconds_total_this_call"] = time.perf_counter() - t_start
    # issue 36: the measured wall time and CPU time of this call (all processes), the load
    ds.attrs["wall_seconds_measured"] = time.perf_counter() - t_start
    ds.attrs["cpu_seconds_measured"] = _cpu_now() - c_start
    ds.attrs["load"] = json.dumps({"start": load_start, "end": os.getloadavg()})
    ds.attrs["cpu_seconds"] = json.dumps(cpu)
    ds.attrs["job_cpu_seconds"] = json.dumps(job_cpu)
    ds.attrs["workers"] = workers
    ds.attrs["models"] = json.dumps(models)
    if reuse is not None:
        ds.attrs["reused_from"] = str(reuse)
    meta = provenance(
        dataclasses.asdict(cfg),
        seed=list(cfg.seeds),
        extra={"skipped_variants": skipped, "load": os.getloadavg(),
               "reused_from": str(reuse) if reuse else None,
               "wall_seconds_measured": ds.attrs["wall_seconds_measured"],
               "cpu_seconds_measured": ds.attrs["cpu_seconds_measured"]},
    )  # fmt: skip
    write_netcdf(out / "results.nc", ds, meta=meta)
    text = report(ds)
    from sims.runtime.io import atomic_path

    with atomic_path(out / "report.md") as tmp:
        tmp.write_text(text)
    _say(text, quiet)
    return ds


def check_reuse_folder(reuse_from, out: Path, arg: str = "reuse_from") -> Path:
    """``reuse_from`` resolved if it is another run's folder with finished jobs, else ValueError."""
    reuse = Path(reuse_from).resolve()
    if reuse == Path(out).resolve() or not (reuse / "jobs").is_dir():
        raise ValueError(
            f"`{arg}`={str(reuse_from)!r} is not the folder of another finished run "
            "(no jobs/ in it); run the experiment there first."
        )
    return reuse


def _reused_run(reuse_from, out: Path, data: Path):
    """The folder of a finished run to reuse and its job store; checks its corpus is ours."""
    from sims.runtime.parallel import JobStore

    reuse = check_reuse_folder(reuse_from, out)
    for name in ("MathInstruct.json", "pretrain.json", "heldout.json"):
        mine, theirs = data / name, reuse / "data" / name
        if mine.exists() and (not theirs.exists() or mine.read_bytes() != theirs.read_bytes()):
            raise ValueError(
                f"`reuse_from`: {theirs} differs from this run's {mine}; reuse a run of the "
                "same corpus settings."
            )
    return reuse, JobStore(reuse / "jobs")


def _in_reused_run(jobs: list[dict], out: Path, reuse: Path | None, store) -> list[dict]:
    """The reused run's version of ``jobs`` (its paths); every one must be in its store.

    A job is keyed by its arguments, paths included, so the reused run's folder is tried as an
    absolute path and relative to the working folder: a run started with the default (relative)
    ``--out`` keyed its jobs by relative paths, while ``reuse`` is resolved.
    """
    if reuse is None:
        return jobs
    mine = str(out)
    first = None
    for prefix in dict.fromkeys((str(reuse), os.path.relpath(reuse))):
        moved = [
            {k: prefix + v[len(mine) :] if isinstance(v, str) and v.startswith(mine) else v
             for k, v in j.items()}
            for j in jobs
        ]  # fmt: skip
        missing = [
            j["kind"] + " " + Path(j["out"]).name for j in moved if not store.path(j).exists()
        ]
        if not missing:
            return moved
        first = first or missing
    raise ValueError(
        f"`reuse_from`: {reuse} has no result for {first} (another configuration?); "
        "run without reusing."
    )
