"""The confirmation's jobs: pre-training, proxy trajectories and one fine-tuning + evaluation.

Each job is a picklable ``dict`` run in a worker process by :func:`~.run.run_confirmation`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import numpy as np

from llm_validation.config import FinetuneConfig
from llm_validation.data.records import BENCHMARKS, Example
from llm_validation.experiments.confirm.analysis import heldout_subset, score_heldout
from llm_validation.experiments.confirm.design import VARIANTS, Variant

# ----------------------------------------------------------------------------- jobs


def _selected(v: Variant) -> Variant:
    """The variant whose selection ``v`` needs (``ft_matched``: FT+UP's, for its step count)."""
    return VARIANTS[v.match_steps] if v.match_steps is not None else v


def _worker_setup(job: dict) -> None:
    """A job's process: its torch threads, and no progress bars from the libraries.

    transformers draws a "Writing model shards" bar at every checkpoint it saves, dozens per
    pre-training run, between the confirmation's own bars; the jobs report through those.
    """
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(job["threads"])
    hf_logging.disable_progress_bar()


def _threads(workers: int, fixed: int | None = None) -> int:
    return fixed if fixed else max(1, (os.cpu_count() or 1) // max(1, workers))


def _examples(path: str | os.PathLike) -> list[Example]:
    from llm_validation.data.records import load_mathinstruct

    return load_mathinstruct(path)


def _corrupted(path) -> np.ndarray:
    recs = json.loads(Path(path).read_text())
    return np.array([bool(r.get("corrupted", False)) for r in recs]), np.array(
        [int(r.get("level", 0)) for r in recs]
    )


# Module-level functions (sims.runtime.parallel.pmap spawns processes): each takes one dict.


def _job_pretrain(job: dict):
    import xarray as xr

    from llm_validation.train.scratch import pretrain_from_scratch

    _worker_setup(job)
    ex = _examples(job["pretrain_file"])
    t0, c0 = time.perf_counter(), time.process_time()
    folder = pretrain_from_scratch(ex, job["out"], job["cfg"], progress=False)
    return xr.Dataset(
        attrs={
            "folder": str(folder),
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
        }
    )


def _job_proxy(job: dict):
    """The proxy run: its K checkpoints' losses (clustering) and its learning times.

    Issue 36: every training example's loss on a log-spaced schedule from step 0
    (``lt_loss``), from which the learning times of the selection check come.
    """
    from llm_validation.data.records import tokenize_examples
    from llm_validation.models.registry import load_tokenizer
    from llm_validation.train.proxy import plan_proxy, record_trajectories
    from llm_validation.train.trainer import LearningTimeRecorder
    from sims.selection import log_spaced_steps

    _worker_setup(job)
    cfg = dataclasses.replace(job["cfg"], model=job["model"], seed=job["seed"])
    train = _examples(job["train_file"])
    t0, c0 = time.perf_counter(), time.process_time()
    callbacks, lt = [], None
    if job.get("lt_records", 0):
        stop = plan_proxy(len(train), cfg).stop_step
        steps = log_spaced_steps(stop, min(job["lt_records"], stop + 1)).tolist()
        tok = load_tokenizer(cfg.model)
        lt = LearningTimeRecorder(
            tokenize_examples(train, tok, max_length=job["max_length"]), steps,
            Path(job["out"]) / "lt_losses", pad_id=tok.pad_token_id,
            batch_tokens=cfg.loss_batch_tokens, save_checkpoints=False, progress=False,
        )  # fmt: skip
        callbacks.append(lt)
    ds = record_trajectories(
        train, cfg, job["out"], max_length=job["max_length"], progress=False, callbacks=callbacks
    )
    if lt is not None and len(lt.done()) == len(lt.steps):
        ds = ds.assign(lt_loss=(("example", "lt_record"), lt.trajectories()))
        ds = ds.assign_coords(lt_step=("lt_record", np.asarray(lt.steps)))
    ds.attrs = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
    return ds


def _job_finetune(job: dict):
    """Fine-tune one (variant, seed), record probe losses, evaluate; return an xr.Dataset."""
    import xarray as xr

    from llm_validation.data.records import load_benchmark
    from llm_validation.evaluate.generation import evaluate_benchmarks
    from llm_validation.models.registry import load_model
    from llm_validation.train.finetune import finetune, load_finetuned
    from llm_validation.train.trainer import LossRecorder, schedule

    _worker_setup(job)
    out = Path(job["out"])
    benches = {n: load_benchmark(n, root=job["bench_dir"]) for n in BENCHMARKS}
    t0, c0 = time.perf_counter(), time.process_time()
    probes_ds = None
    held = _examples(job["heldout_file"]) if job.get("heldout_file") else []
    if job["variant"] == "pt":
        model, tok = load_model(job["model"], padding_side="left")
        train_s, train_steps = 0.0, 0
    else:
        cfg: FinetuneConfig = job["cfg"]
        train = _examples(job["train_file"])
        counts = np.asarray(job["counts"])
        n_steps = schedule(int(counts.sum()), cfg.batch_size, cfg.epochs).total
        # issue 36: log-spaced from step 0, so early half-drops are bracketed by recordings
        from sims.selection import log_spaced_steps

        rec_steps = log_spaced_steps(n_steps, min(job["n_records"] + 1, n_steps + 1)).tolist()
        from llm_validation.data.records import tokenize_examples
        from llm_validation.models.registry import load_tokenizer

        tok0 = load_tokenizer(cfg.model)
        probe_ex = [train[i] for i in job["probes"]]
        recorder = LossRecorder(
            tokenize_examples(probe_ex, tok0, max_length=job["max_length"]),
            rec_steps,
            out / "probe_losses",
            pad_id=tok0.pad_token_id,
            save_checkpoints=False,
            progress=False,
        )
        res = finetune(
            train,
            counts,
            cfg,
            out,
            max_length=job["max_length"],
            callbacks=[recorder],
            progress=False,
        )
        train_s, train_steps = res.seconds, res.steps
        if len(recorder.done()) == len(recorder.steps):
            probes_ds = xr.Dataset(
                {"probe_loss": (("probe", "record"), recorder.trajectories())},
                coords={"probe": np.asarray(job["probes"]), "record_step": ("record", rec_steps)},
            )
        model, tok = load_finetuned(cfg.model, res.final, dtype="auto")
    scores = evaluate_benchmarks(
        model,
        tok,
        benches,
        out / "eval",
        max_new_tokens=job["max_new_tokens"],
        batch_size=job["eval_batch_size"],
        progress=False,
        execute=job.get("execute", True),
    )
    acc = np.array([scores[b]["accuracy"] for b in BENCHMARKS])
    data = {"accuracy": ("benchmark", acc)}
    # issue 36: per-item verdicts (both multiple-choice scorings), in benchmark order
    ok, ok_mapped = [], []
    for b in BENCHMARKS:
        rows = [json.loads(x) for x in (out / "eval" / f"{b}.jsonl").read_text().splitlines()]
        ok += [bool(r["correct"]) for r in rows]
        ok_mapped += [bool(r.get("correct_mapped", r["correct"])) for r in rows]
    data["item_correct"] = ("item", np.asarray(ok, dtype=np.int8))
    data["item_correct_mapped"] = ("item", np.asarray(ok_mapped, dtype=np.int8))
    for key in ("programs", "programs_correct", "programs_correct_text"):
        data[key] = ("benchmark", np.array([scores[b].get(key, 0) for b in BENCHMARKS]))
    if held:
        from llm_validation.data.records import tokenize_examples
        from llm_validation.train.trainer import per_example_losses

        recs = tokenize_examples(held, tok, max_length=job["max_length"])
        data["heldout_loss"] = ("heldout", per_example_losses(model, recs, pad_id=tok.pad_token_id))
        if job.get("heldout_acc_per_source", 0):
            from llm_validation.data.records import format_prompt
            from llm_validation.evaluate.generation import generate

            raw = json.loads(Path(job["heldout_file"]).read_text())
            idx = heldout_subset([r["source"] for r in raw], job["heldout_acc_per_source"])
            comps = generate(
                model, tok, [format_prompt(raw[i]["instruction"]) for i in idx],
                max_new_tokens=job["max_new_tokens"], batch_size=job["eval_batch_size"],
            )  # fmt: skip
            correct = np.full(len(held), np.nan)
            correct[idx] = score_heldout(comps, [raw[i] for i in idx])
            data["heldout_correct"] = ("heldout", correct)
    ds = xr.Dataset(
        data,
        coords={"benchmark": list(BENCHMARKS)},
        attrs={
            "train_seconds": train_s,
            "train_steps": train_steps,
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
        },
    )
    if probes_ds is not None:
        ds = xr.merge([ds, probes_ds])
        ds.attrs.update(
            train_seconds=train_s,
            train_steps=train_steps,
            seconds=time.perf_counter() - t0,
            cpu_seconds=time.process_time() - c0,
        )
    return ds
