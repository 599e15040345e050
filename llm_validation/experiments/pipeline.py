"""The pipeline's stages on one run folder (Sections 5-7, Appendices D-E).

Stages, in order (each reads what the previous ones wrote in ``run_dir`` and can be rerun or
resumed alone; each writes its config and provenance; a stage rerun with another config is
refused before anything is written):

========== ======================================================================= ============
stage      what                                                                    writes
========== ======================================================================= ============
data       read and check the training file, seeded 95/5 split, source counts      data/
proxy      train the proxy 1/3 epoch, losses at K checkpoints                      proxy/
select     per-source k-means; hard / random / easy masks; report and plot        selection/
synthesize rephrase hard problems (Appendix E) for the synth/both settings         synthesis/
finetune   LoRA fine-tuning per setting (ft, ft_up, random, easy, synth, both)     finetune/
evaluate   zero-shot greedy accuracy on the benchmarks, pretrained and fine-tuned  eval/
report     the Table 2 layout (PT / FT / FT+UP / ablations) as Markdown            report.md
========== ======================================================================= ============

:func:`plan` describes all of it without loading a model (``--dry-run``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_validation.config import PipelineConfig, config_to_dict
from llm_validation.data.records import (
    BENCHMARKS,
    Benchmark,
    DataFormatError,
    Example,
    load_benchmark,
    load_mathinstruct,
    source_counts,
    split_train_val,
)
from llm_validation.runs import Stage

__all__ = [
    "STAGES",
    "assign_to_hard",
    "check_inputs",
    "load_split",
    "load_benchmarks",
    "plan",
    "run_data",
    "run_proxy",
    "run_select",
    "run_synthesize",
    "run_finetune",
    "run_evaluate",
    "run_report",
    "run_all",
]

STAGES = ("data", "proxy", "select", "synthesize", "finetune", "evaluate", "report")

_COLUMN = {"pretrained": "PT", "ft": "FT", "ft_up": "FT+UP", "random": "Rand.", "easy": "Easy",
           "synth": "Synth.", "both": "Both"}  # fmt: skip


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()[:16]


def _data_key(cfg: PipelineConfig) -> dict:
    d = cfg.data
    return {"train_file": d.train_file, "train_sha256": _file_digest(d.train_file),
            "val_fraction": d.val_fraction, "split_seed": d.split_seed,
            "max_examples": d.max_examples, "max_length": d.max_length}  # fmt: skip


def load_split(cfg: PipelineConfig) -> tuple[list[Example], list[Example]]:
    """Read the training file and split it (deterministic: same split in every stage).

    Raises:
        ValueError: when no ``data.train_file`` is configured.
        DataFormatError: for a missing or malformed file (file, line, field).
    """
    if not cfg.data.train_file:
        raise ValueError("`data.train_file` is not set; give the MathInstruct-format JSON/JSONL.")
    examples = load_mathinstruct(cfg.data.train_file, max_examples=cfg.data.max_examples)
    return split_train_val(examples, val_fraction=cfg.data.val_fraction, seed=cfg.data.split_seed)


def load_benchmarks(cfg: PipelineConfig) -> dict[str, Benchmark]:
    """The configured benchmarks (files from ``benchmark_files`` or ``benchmark_dir``)."""
    out = {}
    for name in cfg.data.benchmarks:
        path = cfg.data.benchmark_files.get(name)
        if path is None and cfg.data.benchmark_dir is None:
            raise ValueError(
                f"no file for benchmark {name!r}: set `data.benchmark_dir` (MAmmoTH layout) or "
                "`data.benchmark_files`, or leave it out of `data.benchmarks`."
            )
        out[name] = load_benchmark(name, path, root=cfg.data.benchmark_dir,
                                   max_items=cfg.data.max_eval_items)  # fmt: skip
    return out


def _run_dir(cfg: PipelineConfig) -> Path:
    return Path(cfg.run_dir)


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, flush=True)


# ----------------------------------------------------------------------------- plan


def plan(cfg: PipelineConfig) -> str:
    """What ``run-all`` would do: data sizes, step counts, models, outputs (loads no model).

    Raises:
        DataFormatError, ValueError: the same input errors a real run would hit first.
    """
    from llm_validation.models.registry import describe_model
    from llm_validation.train.finetune import plan_finetune
    from llm_validation.train.proxy import plan_proxy

    lines = [f"run folder: {cfg.run_dir}"]
    train, val = load_split(cfg)
    counts = source_counts(train)
    lines.append(
        f"data: {cfg.data.train_file}: {len(train) + len(val)} examples -> {len(train)} train / "
        f"{len(val)} validation (seed {cfg.data.split_seed}), {len(counts)} sources, "
        f"max length {cfg.data.max_length}"
    )
    for s, n in counts.items():
        lines.append(f"    {n:>8}  {s}")
    pp = plan_proxy(len(train), cfg.proxy)
    lines.append(
        f"proxy: {cfg.proxy.model} [{describe_model(cfg.proxy.model)}], "
        f"{'LoRA' if cfg.proxy.lora else 'full'} training, {pp.steps_per_epoch} steps/epoch at "
        f"batch {cfg.proxy.batch_size}; trains {pp.stop_step} steps "
        f"({cfg.proxy.epoch_fraction:.3g} epoch, schedule of {pp.scheduled_steps}); losses at "
        f"steps {list(pp.record_steps)} = {len(train) * len(pp.record_steps)} forward passes"
    )
    s = cfg.selection
    lines.append(
        f"select: k-means k={s.n_clusters} on {s.features} "
        f"({s.n_checkpoints or cfg.proxy.n_checkpoints} checkpoints), "
        f"{'per source' if s.per_source else 'global'}, small sources: {s.small_sources}"
        f"{f' or < {s.min_source_size}' if s.min_source_size else ''}; "
        f"upsample x{1 + s.upsample_factor}"
    )
    f = cfg.finetune
    if any(x in f.settings for x in ("synth", "both")):
        lines.append(f"synthesize: {cfg.synthesis.model} [{describe_model(cfg.synthesis.model)}]")
    lora_desc = f"LoRA r={f.lora_rank} a={f.lora_alpha:g}" if f.lora else "full"
    for setting in f.settings:
        extra = "" if setting == "ft" else " (+ selected examples; size known after `select`)"
        fp = plan_finetune(len(train), f)
        lines.append(
            f"finetune[{setting}]: {f.model}, {lora_desc}, {f.optimizer}, {f.epochs:g} epochs, "
            f"batch {f.batch_size} = {f.per_device_batch_size}"
            f" x {fp['accumulation']} accumulation x {fp['processes']} processes; "
            f">= {fp['total_steps']} steps{extra}; checkpoints every {f.save_steps} steps and "
            "at each epoch's end"
        )
    lines.append(f"    target: {describe_model(f.model)}")
    e = cfg.evaluate
    try:
        benches = load_benchmarks(cfg)
        desc = ", ".join(f"{k} ({len(v)})" for k, v in benches.items())
    except (ValueError, DataFormatError) as exc:
        desc = f"NOT READY: {exc}"
    runs = (["pretrained"] if e.pretrained else []) + list(f.settings)
    lines.append(
        f"evaluate: {desc}; greedy, {e.max_new_tokens} new tokens, batch {e.batch_size}, "
        f"checkpoints: {e.checkpoints}; models: {', '.join(runs)}"
    )
    lines.append(f"report: {Path(cfg.run_dir) / 'report.md'}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- checks

#: What each CLI step needs checked before it writes anything.
_NEEDS = {
    "data": (),
    "proxy": ("proxy",),
    "select": (),
    "synthesize": ("synthesis",),
    "finetune": ("finetune",),
    "evaluate": ("benchmarks", "finetune_model"),
    "report": ("benchmarks", "finetune_model"),
}


def check_inputs(cfg: PipelineConfig, step: str = "run-all", settings=None) -> None:
    """Check what ``step`` reads before anything is written (``run-all``: every step).

    Reads and splits the training file, checks the models' specs (a path that exists, a GGUF
    file, an installed named model), the step counts of the proxy and the fine-tuning, the LoRA
    targets of a local target model (built on the meta device: no weights are loaded), and the
    benchmark files. A rerun of ``run-all`` thus fails in seconds, not after hours of proxy
    training, when the evaluation's benchmarks are missing.

    Raises:
        ValueError, DataFormatError, FileNotFoundError: naming the config key and the fix.
    """
    from llm_validation.models.registry import check_model_spec
    from llm_validation.train.finetune import plan_finetune
    from llm_validation.train.proxy import plan_proxy

    if step == "run-all":
        f = cfg.finetune
        needs = {"finetune", "benchmarks"}
        if any(x != "ft" for x in f.settings):
            needs.add("proxy")
        if any(x in ("synth", "both") for x in f.settings):
            needs.add("synthesis")
    else:
        needs = set(_NEEDS[step])
    train, _ = load_split(cfg)
    if "proxy" in needs:
        check_model_spec(cfg.proxy.model, key="proxy.model")
        plan_proxy(len(train), cfg.proxy)
    if "synthesis" in needs:
        check_model_spec(cfg.synthesis.model, key="synthesis.model")
    if "finetune" in needs or "finetune_model" in needs:
        check_model_spec(cfg.finetune.model, key="finetune.model")
    if "finetune" in needs:
        plan_finetune(len(train), cfg.finetune)
        if cfg.finetune.lora:
            from llm_validation.models.lora import check_lora_targets

            check_lora_targets(cfg.finetune.model, cfg.finetune.lora_targets)
        from llm_validation.config import SETTINGS

        for setting in settings or ():
            if setting not in SETTINGS:
                raise ValueError(
                    f"`--settings` {setting!r} is not a setting; valid: {', '.join(SETTINGS)}."
                )
        if step == "finetune":  # every setting's inputs now, not after training the first
            _check_finetune_inputs(cfg, settings or cfg.finetune.settings)
    if "benchmarks" in needs:
        load_benchmarks(cfg)


def _check_finetune_inputs(cfg: PipelineConfig, settings: Sequence[str]) -> None:
    """The earlier stages each of ``settings`` reads are finished (``finetune`` run alone)."""
    for setting in settings:
        if setting != "ft" and _selection_stage(cfg).check() != "done":
            raise FileNotFoundError(
                f"setting {setting!r} needs the selection, which is not in {cfg.run_dir} yet: run "
                "`proxy` and `select` first (or `run-all`), or fine-tune only `--settings ft`."
            )
        if setting in ("synth", "both") and _synthesis_stage(cfg).check() != "done":
            raise FileNotFoundError(
                f"setting {setting!r} needs the synthesis, which is not in {cfg.run_dir} yet: run "
                "`synthesize` first (or `run-all`)."
            )


# ----------------------------------------------------------------------------- stages


def run_data(cfg: PipelineConfig, *, quiet: bool = False) -> dict:
    """Check and split the training data; write ``data/split.json``."""
    from sims.runtime.io import provenance, write_json

    train, val = load_split(cfg)
    stage = Stage(_run_dir(cfg) / "data", "data", _data_key(cfg))
    if stage.start() == "done":
        return stage.summary()
    summary = {"n_train": len(train), "n_val": len(val), "sources": source_counts(train)}
    write_json(
        stage.folder / "split.json",
        {**summary, "train_index": [e.index for e in train], "val_index": [e.index for e in val]},
        meta=provenance(config_to_dict(cfg.data), seed=cfg.data.split_seed),
    )  # fmt: skip
    stage.finish(summary)
    _say(f"data: {len(train)} train / {len(val)} validation, {len(summary['sources'])} sources",
         quiet)  # fmt: skip
    return summary


def _proxy_stage(cfg: PipelineConfig) -> Stage:
    key = {"data": _data_key(cfg), "proxy": config_to_dict(cfg.proxy)}
    return Stage(_run_dir(cfg) / "proxy", "proxy", key)


def run_proxy(cfg: PipelineConfig, *, quiet: bool = False, callbacks: Sequence = ()):
    """Train the proxy and record trajectories (``proxy/trajectories.nc``)."""
    from llm_validation.train.proxy import record_trajectories

    train, _ = load_split(cfg)
    stage = _proxy_stage(cfg)
    state = stage.check()
    ds = record_trajectories(
        train, cfg.proxy, stage.folder, max_length=cfg.data.max_length, progress=not quiet,
        callbacks=callbacks, on_start=stage.start,
    )  # fmt: skip
    if state != "done":
        meta = ds.attrs.get("meta", {})
        stage.finish({"examples": int(ds.sizes["example"]), "steps": ds["step"].values.tolist(),
                      "train_seconds": meta.get("train_seconds"),
                      "loss_seconds": meta.get("loss_seconds"),
                      "loss_tokens": meta.get("loss_tokens")})  # fmt: skip
    _say(f"proxy: trajectories of {ds.sizes['example']} examples at steps "
         f"{ds['step'].values.tolist()}", quiet)  # fmt: skip
    return ds


#: What reading a damaged NetCDF/JSON result raises (netCDF4, h5py, xarray, json).
_DAMAGED = (OSError, ValueError, RuntimeError, KeyError)


def _read_result(path: Path, step: str):
    """A finished stage's NetCDF result, or ``None`` (with a line naming it) when damaged."""
    from sims.runtime.io import read_netcdf

    try:
        return read_netcdf(path)
    except _DAMAGED as exc:
        print(f"{step}: {path} is unreadable ({type(exc).__name__}); recomputing it", flush=True)
        return None


def _read_input(path: Path, fix: str):
    """A previous stage's NetCDF result; a damaged one is refused by name, with ``fix``."""
    from sims.runtime.io import read_netcdf

    try:
        return read_netcdf(path)
    except _DAMAGED as exc:
        raise ValueError(f"{path} is unreadable ({type(exc).__name__}); {fix}.") from None


def _read_trajectories(cfg: PipelineConfig):
    path = _run_dir(cfg) / "proxy" / "trajectories.nc"
    _proxy_stage(cfg).check()  # refuses trajectories made with another proxy/data config
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; run the `proxy` step first.")
    return _read_input(path, "rerun `proxy` to rebuild it from the recorded losses")


def _selection_stage(cfg: PipelineConfig) -> Stage:
    key = {"proxy": _proxy_stage(cfg).hash, "selection": config_to_dict(cfg.selection)}
    return Stage(_run_dir(cfg) / "selection", "selection", key)


def run_select(cfg: PipelineConfig, *, quiet: bool = False):
    """Cluster the trajectories; write ``selection/`` (``selection.nc``, report, plot)."""
    from llm_validation.select.clustering import plot_selection, select_examples, selection_table
    from sims.runtime.io import provenance, write_netcdf

    traj = _read_trajectories(cfg)
    stage = _selection_stage(cfg)
    if stage.check() == "done":
        sel = _read_result(stage.folder / "selection.nc", "select")
        if sel is not None:
            return sel
    sel = select_examples(traj, cfg.selection)  # raises before anything is written
    stage.start()
    meta = provenance(config_to_dict(cfg.selection), seed=cfg.selection.seed)
    write_netcdf(stage.folder / "selection.nc", sel, meta=meta)
    table = selection_table(sel)
    from sims.runtime.io import atomic_path

    with atomic_path(stage.folder / "report.md") as tmp:
        tmp.write_text(f"# Selection ({cfg.selection.features}, "
                       f"{sel.attrs['n_checkpoints']} checkpoints)\n\n{table}\n")  # fmt: skip
    plot_selection(traj, sel, stage.folder / "selection.png")
    stage.finish({"hard_fraction": sel.attrs["hard_fraction"], "n_hard": int(sel["hard"].sum())})
    _say(f"select: {int(sel['hard'].sum())} hard of {sel.sizes['example']} "
         f"({100 * sel.attrs['hard_fraction']:.1f}%)\n{table}", quiet)  # fmt: skip
    return sel


def _read_selection(cfg: PipelineConfig):
    stage = _selection_stage(cfg)
    path = stage.folder / "selection.nc"
    if stage.check() != "done":
        raise FileNotFoundError(f"{path} is missing; run `select` first.")
    return _read_input(path, "rerun `select` to recompute it")


def _synthesis_stage(cfg: PipelineConfig) -> Stage:
    key = {"selection": _selection_stage(cfg).hash, "synthesis": config_to_dict(cfg.synthesis)}
    return Stage(_run_dir(cfg) / "synthesis", "synthesis", key)


def _rank() -> int:
    import os

    return int(os.environ.get("RANK", "0"))


def _wait_for_everyone() -> None:
    """Barrier across ``accelerate launch`` processes (no-op in a single process)."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from accelerate import PartialState

        PartialState().wait_for_everyone()


def run_synthesize(cfg: PipelineConfig, *, quiet: bool = False) -> list[Example]:
    """Rephrase the hard examples (Appendix E); write ``synthesis/synthetic.jsonl``.

    Generation runs on process 0 only; under ``accelerate launch`` the others wait.
    """
    if _rank() != 0:
        _wait_for_everyone()
        return _read_synthetic(_synthesis_stage(cfg).folder / "synthetic.jsonl")
    try:
        return _run_synthesize(cfg, quiet=quiet)
    finally:
        _wait_for_everyone()


def _run_synthesize(cfg: PipelineConfig, *, quiet: bool = False) -> list[Example]:
    from llm_validation.data.records import write_jsonl
    from llm_validation.models.registry import load_model
    from llm_validation.select.synthesis import synthesize

    stage = _synthesis_stage(cfg)
    path = stage.folder / "synthetic.jsonl"
    if stage.check() == "done":
        return _read_synthetic(path)
    sel = _read_selection(cfg)
    train, _ = load_split(cfg)
    hard_ids = set(sel["example"].values[sel["hard"].values.astype(bool)].tolist())
    hard = [e for e in train if e.index in hard_ids]
    sc = cfg.synthesis
    if sc.max_problems is not None and len(hard) > sc.max_problems:
        pick = np.sort(np.random.default_rng(sc.seed).choice(len(hard), sc.max_problems, False))
        hard = [hard[i] for i in pick]
    model, tok = load_model(sc.model, padding_side="left")
    stage.start()
    res = synthesize(hard, model, tok, max_new_tokens=sc.max_new_tokens, batch_size=sc.batch_size,
                     max_question_chars=sc.max_question_chars, progress=not quiet)  # fmt: skip
    kept = list(res.examples)
    recluster = None
    if sc.recluster and kept:
        kept, recluster = _recluster(cfg, train, kept, sel, quiet=quiet)
    write_jsonl(path, [{"instruction": e.instruction, "output": e.output, "source": e.source,
                        "original_index": e.index} for e in kept])  # fmt: skip
    write_jsonl(stage.folder / "generations.jsonl",
                [{"original_index": e.index, "completion": c}
                 for e, c in zip(hard, res.completions, strict=True)])  # fmt: skip
    summary = {"attempted": res.attempted, "accepted": len(res.examples),
               "acceptance": res.acceptance, "rejected": res.rejected,
               "kept_after_recluster": len(kept), "recluster": recluster}  # fmt: skip
    stage.finish(summary)
    why = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in res.rejected.items()) or "none"
    _say(f"synthesize: {len(res.examples)}/{res.attempted} accepted, {len(kept)} kept "
         f"(rejected: {why})", quiet)  # fmt: skip
    return kept


def _recluster(cfg, train, synthetic, sel, *, quiet):
    """Keep the synthetic problems whose proxy trajectories fall in their source's hard cluster."""
    from llm_validation.train.proxy import record_trajectories
    from sims.selection import trajectory_features

    folder = _run_dir(cfg) / "synthesis" / "proxy"
    traj = record_trajectories(train, cfg.proxy, folder, max_length=cfg.data.max_length,
                               progress=not quiet, score_examples=synthetic)  # fmt: skip
    k = sel.attrs["n_checkpoints"]
    feats = trajectory_features(traj["loss"].values[:, :k], cfg.selection.features)
    keep, hard = assign_to_hard(feats, [e.source for e in synthetic], sel.attrs["per_source"],
                                per_source=cfg.selection.per_source)  # fmt: skip
    kept = [e for e, k_ in zip(synthetic, keep, strict=True) if k_]
    return kept, {"synthetic": len(synthetic), "kept": len(kept), "assigned_hard": int(hard.sum())}


def assign_to_hard(feats: np.ndarray, sources, per_source: dict, *, per_source_mode: bool = True):
    """Place new examples (synthetic rephrasings) on the selection's clusters.

    A row is *hard* when the nearest k-means centre of its source (squared Euclidean distance
    in feature space) is the last one, the highest-loss cluster (centres are ordered by mean
    loss, :class:`sims.selection.ClusterResult`). A row of a source upsampled whole (rule
    ``small``) is kept without a cluster; a source without centres keeps nothing.

    Args:
        feats: ``(n, n_features)`` features of the new rows (same map as the selection's).
        sources: each row's source.
        per_source: the selection's ``attrs["per_source"]`` (``rule``, ``centers`` per source).
        per_source_mode: clusters are per source (else one global entry ``"all"``).

    Returns:
        ``(keep, hard)`` boolean arrays: kept rows, and those assigned to a hard cluster.
    """
    n = len(sources)
    keep, hard = np.zeros(n, bool), np.zeros(n, bool)
    for row, src in enumerate(sources):
        info = per_source.get(src if per_source_mode else "all", {})
        if info.get("rule") == "small":
            keep[row] = True
            continue
        centers = np.asarray(info.get("centers", []), dtype=float)
        if centers.size == 0:
            continue
        d = ((centers - feats[row]) ** 2).sum(axis=1)
        hard[row] = keep[row] = int(np.argmin(d)) == len(centers) - 1
    return keep, hard


def _read_synthetic(path: Path) -> list[Example]:
    from llm_validation.data.records import load_mathinstruct

    if not path.exists() or path.stat().st_size == 0:
        return []
    return load_mathinstruct(path)


def training_set(cfg: PipelineConfig, setting: str) -> tuple[list[Example], np.ndarray]:
    """Examples and repeat counts of a fine-tuning ``setting`` (see :data:`config.SETTINGS`)."""
    from llm_validation.select.clustering import usage_counts

    train, _ = load_split(cfg)
    if setting == "ft":
        return train, np.ones(len(train), np.int64)
    sel = _read_selection(cfg)
    if not np.array_equal(sel["example"].values, [e.index for e in train]):
        raise ValueError(
            "the selection does not match the training split (another data file or split?); "
            "rerun `proxy` and `select` in a new run_dir."
        )
    counts = usage_counts(sel, setting, cfg.selection.upsample_factor)
    if setting in ("synth", "both"):
        stage = _synthesis_stage(cfg)
        if stage.check() != "done":
            raise FileNotFoundError(f"setting {setting!r} needs `synthesize` to run first.")
        synth = _read_synthetic(stage.folder / "synthetic.jsonl")
        return train + synth, np.r_[counts, np.ones(len(synth), np.int64)]
    return train, counts


def _finetune_stage(cfg: PipelineConfig, setting: str) -> Stage:
    key = {"data": _data_key(cfg), "finetune": config_to_dict(cfg.finetune), "setting": setting}
    key["finetune"].pop("settings")
    if setting != "ft":
        key["selection"] = _selection_stage(cfg).hash
    if setting in ("synth", "both"):
        key["synthesis"] = _synthesis_stage(cfg).hash
    return Stage(_run_dir(cfg) / "finetune" / setting, f"finetune[{setting}]", key)


def run_finetune(cfg: PipelineConfig, settings: Sequence[str] | None = None, *,
                 quiet: bool = False, callbacks: Sequence = ()) -> dict:  # fmt: skip
    """Fine-tune the target on each setting; ``finetune/<setting>/final`` and epoch checkpoints."""
    from llm_validation.train.finetune import finetune, is_main_process
    from llm_validation.train.trainer import world_size

    out = {}
    for setting in settings or cfg.finetune.settings:
        examples, counts = training_set(cfg, setting)
        stage = _finetune_stage(cfg, setting)
        state = stage.check()
        if state == "done":
            out[setting] = stage.summary()
            continue

        def start(stage=stage, examples=examples, counts=counts, setting=setting):
            if is_main_process():
                stage.start()
                _write_usage(stage.folder / "usage.nc", examples, counts, setting)

        res = finetune(examples, counts, cfg.finetune, stage.folder,
                       max_length=cfg.data.max_length, callbacks=callbacks,
                       progress=not quiet, on_start=start,
                       label=f"finetune[{setting}]")  # fmt: skip
        summary = {"n_train": res.n_train, "steps": res.steps, "seconds": res.seconds,
                   "processes": world_size(),
                   "upsampled": int((counts > 1).sum()), "final": str(res.final),
                   "epoch_checkpoints": [str(p) for p in res.epoch_checkpoints]}  # fmt: skip
        if is_main_process():
            stage.finish(summary)
        out[setting] = summary
        _say(f"finetune[{setting}]: {res.n_train} examples, {res.steps} steps, "
             f"{res.seconds:.0f} s", quiet)  # fmt: skip
    return out


def _write_usage(path: Path, examples: Sequence[Example], counts: np.ndarray, setting: str):
    """Which example was trained on how often (``count`` by original ``example`` index)."""
    import xarray as xr

    from sims.runtime.io import write_netcdf

    ds = xr.Dataset(
        {"count": ("row", np.asarray(counts, np.int64)),
         "example": ("row", np.array([e.index for e in examples], np.int64)),
         "source": ("row", np.array([e.source for e in examples], dtype=object))},
        attrs={"setting": setting,
               "description": "training-set usage count of each example (original split, then "
                              "synthetic rows); upsampling is duplication"},
    )  # fmt: skip
    write_netcdf(path, ds)


def _eval_targets(cfg: PipelineConfig) -> list[tuple[str, str, Path | None]]:
    """``(column, eval folder name, checkpoint or None for the pretrained model)``."""
    targets = []
    if cfg.evaluate.pretrained:
        targets.append(("pretrained", "pretrained", None))
    for setting in cfg.finetune.settings:
        stage = _finetune_stage(cfg, setting)
        if stage.check() != "done":
            raise FileNotFoundError(f"finetune[{setting}] has not finished; run `finetune` first.")
        summ = stage.summary()
        if cfg.evaluate.checkpoints == "final":
            targets.append((setting, setting, Path(summ["final"])))
        else:
            for p in summ["epoch_checkpoints"]:
                targets.append((setting, f"{setting}/{Path(p).name}", Path(p)))
    return targets


def run_evaluate(cfg: PipelineConfig, *, quiet: bool = False) -> dict:
    """Evaluate the pretrained and fine-tuned models; ``eval/<name>/scores.json``.

    Evaluation runs on process 0 only (other ``accelerate launch`` processes return ``{}``).
    """
    if _rank() != 0:
        return {}
    from llm_validation.evaluate.generation import evaluate_benchmarks
    from llm_validation.models.registry import load_model
    from llm_validation.train.finetune import load_finetuned

    benches = load_benchmarks(cfg)
    e = cfg.evaluate
    results: dict[str, dict] = {}
    for column, name, ckpt in _eval_targets(cfg):
        folder = _run_dir(cfg) / "eval" / name
        key = {"model": cfg.finetune.model, "checkpoint": str(ckpt) if ckpt else None,
               "evaluate": config_to_dict(e),
               "benchmarks": {k: str(v.path) for k, v in benches.items()},
               "max_eval_items": cfg.data.max_eval_items}  # fmt: skip
        stage = Stage(folder, f"evaluate[{name}]", key)
        if stage.check() == "done":
            results[name] = {"column": column, "scores": stage.summary()["scores"]}
            continue
        if ckpt is None:
            model, tok = load_model(cfg.finetune.model, dtype=e.dtype, padding_side="left")
        else:
            model, tok = load_finetuned(cfg.finetune.model, ckpt, dtype=e.dtype)
        stage.start()
        t0 = time.perf_counter()
        scores = evaluate_benchmarks(
            model, tok, benches, folder, max_new_tokens=e.max_new_tokens,
            batch_size=e.batch_size, stop_strings=e.stop_strings, progress=not quiet,
            meta={"config": key},
        )  # fmt: skip
        stage.finish({"scores": scores, "seconds": time.perf_counter() - t0})
        results[name] = {"column": column, "scores": scores}
        _say(f"evaluate[{name}]: " + ", ".join(f"{k} {100 * v['accuracy']:.1f}%"
                                               for k, v in scores.items()), quiet)  # fmt: skip
        del model
    return results


def run_report(cfg: PipelineConfig, *, quiet: bool = False) -> str:
    """Write ``report.md``: selection summary and the Table 2-style accuracy table."""
    if _rank() != 0:
        return ""
    from llm_validation.evaluate.generation import accuracy_table
    from sims.runtime.io import atomic_path

    results = run_evaluate(cfg, quiet=True)
    cols: dict[str, dict[str, float]] = {}
    best_ckpt = {}
    for name, res in results.items():
        col = _COLUMN.get(res["column"], res["column"])
        acc = {k: v["accuracy"] for k, v in res["scores"].items()}
        avg = float(np.mean(list(acc.values())))
        if col not in cols or avg > float(np.mean(list(cols[col].values()))):
            cols[col], best_ckpt[col] = acc, name  # best epoch checkpoint by average (Table 2)
    any_res = next(iter(results.values()))["scores"]
    sizes = {k: v["n"] for k, v in any_res.items()}
    table = accuracy_table(cols, sizes=sizes, datasets=[b for b in BENCHMARKS if b in sizes])
    parts = [f"# Run report: {cfg.run_dir}", "", "## Accuracy (%), Table 2 layout", "", table, ""]
    if cfg.evaluate.checkpoints == "all":
        parts += ["Best checkpoint per column (by average): "
                  + ", ".join(f"{k}: {v}" for k, v in best_ckpt.items()), ""]  # fmt: skip
    note = _synthesis_note(cfg, cols)
    if note:
        parts += [note, ""]
    sel_report = _run_dir(cfg) / "selection" / "report.md"
    if sel_report.exists():
        parts += ["## Selection", "", sel_report.read_text().split("\n", 2)[-1], ""]
    text = "\n".join(parts)
    with atomic_path(_run_dir(cfg) / "report.md") as tmp:
        tmp.write_text(text)
    _say(text, quiet)
    return text


def _synthesis_note(cfg: PipelineConfig, cols: dict) -> str | None:
    """What the Synth./Both columns mean when the synthesis kept few or no rephrasings."""
    shown = [c for c in ("Synth.", "Both") if c in cols]
    if not shown:
        return None
    stage = _synthesis_stage(cfg).folder / "stage.json"
    if not stage.exists():
        return None
    from sims.runtime.io import read_json

    s = read_json(stage).get("summary", {})
    kept, attempted = s.get("kept_after_recluster", s.get("accepted")), s.get("attempted")
    if kept is None or attempted is None:
        return None
    if kept == 0:
        why = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in s.get("rejected", {}).items())
        same = " and ".join({"Synth.": "FT", "Both": "FT+UP"}[c] for c in shown)
        return (f"Synthesis: 0 of {attempted} rephrasings accepted ({why or 'none kept'}), so "
                f"the {' and '.join(shown)} column{'s' * (len(shown) > 1)} trained on the same "
                f"data as {same}: a rerun of that setting, not a test of synthesis. "
                "The synthesizing model must follow the rephrasing prompt (an instruction "
                "model; the demo's from-scratch target cannot).")  # fmt: skip
    return f"Synthesis: {kept} of {attempted} rephrasings kept and added to the training data."


def run_all(cfg: PipelineConfig, *, quiet: bool = False) -> str:
    """Every stage in order (skipping finished ones); returns the report.

    Every step's inputs are checked first (:func:`check_inputs`).
    """
    check_inputs(cfg, "run-all")
    run_data(cfg, quiet=quiet)
    needs_selection = any(s != "ft" for s in cfg.finetune.settings)
    if needs_selection:
        run_proxy(cfg, quiet=quiet)
        run_select(cfg, quiet=quiet)
    if any(s in ("synth", "both") for s in cfg.finetune.settings):
        run_synthesize(cfg, quiet=quiet)
    run_finetune(cfg, quiet=quiet)
    run_evaluate(cfg, quiet=quiet)
    return run_report(cfg, quiet=quiet)


def stage_functions() -> dict:
    """Stage name -> function (the CLI's steps)."""
    return {"data": run_data, "proxy": run_proxy, "select": run_select,
            "synthesize": run_synthesize, "finetune": run_finetune, "evaluate": run_evaluate,
            "report": run_report}  # fmt: skip
