"""The campaign's stages, in order of value, each at three sizes (``gpu``, ``toy``, ``mini``).

Every stage runs the same code at every size; only the sizes in the ``*_SIZES`` tables change.
What each stage measures, and against which target, is in its docstring and in
``figures/summaries/gpu/README.md``. A GPU lease is 15 minutes of device time
(:mod:`.plan` packs the stages into leases), so the order is by value:

0. ``preflight`` (<= 30 s, folded into the first command of every lease): versions, the GPU, a
   bf16 product, the carried wheels, the project importing on the image's packages; when it
   fails, the call's later stages are blocked with its reason.
1. ``confirm``: the upsampling confirmation (issue 36's design: FT, FT+UP, ``ft_matched``; 10
   fine-tuning seeds on one pre-trained base; accuracy per format and half, held-out loss, the
   selection check) with from-scratch models: nothing carried but the wheels.
2. ``confirm_smollm2``: the same with SmolLM2-135M-Instruct and LoRA from its carried GGUF.
3. ``throughput``: the LLM pipeline's hot loops against issue 11's targets on a randomly
   initialised model of SmolLM2-135M's configuration; the SAM family's cost on the GPU; the
   :mod:`sims.lm` step.
4. ``markov_fig2_3``, ``markov_fig8_9``, ``markov_fig5``: seed 004 at the paper's scale.
5. ``sosd``: seed 002's LM runs at their GPU configuration.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from llm_validation.campaign import carry
from llm_validation.campaign.runner import Context, StageSpec

__all__ = ["STAGES", "SMOLLM2_GGUF", "stage_names", "smollm2_gguf", "target"]

REPO = Path(__file__).resolve().parents[2]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Modules the stages need that the image lacks (their wheels are carried): the imports the
#: preflight checks, with the distribution that provides each.
CARRIED_MODULES = {
    "math_verify": "math-verify",
    "latex2sympy2_extended": "latex2sympy2_extended",
    "antlr4": "antlr4-python3-runtime",
    "gguf": "gguf",
    "netCDF4": "netCDF4",
    "cftime": "cftime",
}


def target(name: str, value: float, op: str, goal: float, unit: str = "") -> dict[str, Any]:
    """A target check for the summary: ``value op goal`` (``op`` is ``>=`` or ``<=``)."""
    if op not in (">=", "<="):
        raise ValueError(f"`op` must be '>=' or '<='; got {op!r}.")
    ok = math.isfinite(value) and (value >= goal if op == ">=" else value <= goal)
    return {"name": name, "value": value, "op": op, "target": goal, "unit": unit, "met": bool(ok)}


def _write_json(path: Path, payload: dict) -> None:
    from sims.runtime.io import write_json

    write_json(path, payload)


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    from sims.runtime.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([f"{x:.6g}" if isinstance(x, float) else x for x in r])


# ------------------------------------------------------------------------------ preflight

PREFLIGHT_SIZES = {
    "gpu": dict(matmul_n=8192, matmul_reps=20, modules="all"),
    "toy": dict(matmul_n=512, matmul_reps=3, modules="all"),
    "mini": dict(
        matmul_n=128,
        matmul_reps=2,
        modules=[
            "sims.runtime.io", "llm_validation.campaign.carry", "llm_validation.evaluate.scoring"
        ],
    ),
}


def import_check(modules, *, emulate: bool, allowed=(), timeout: float = 300) -> dict[str, str]:
    """Import ``modules`` (``"all"``: every module of the four packages) in a fresh interpreter.

    With ``emulate``, only the image's packages and the folders in ``allowed`` are importable
    (:func:`llm_validation.campaign.carry.emulate_image`). Returns ``{module: error}`` for the
    failures.
    """
    spec = json.dumps(
        {"modules": modules, "emulate": emulate, "allowed": [str(a) for a in allowed]}
    )
    code = "import llm_validation.campaign.carry as c; c.import_check_main()"
    env = {
        **os.environ,
        "SBT_IMPORT_CHECK": spec,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
        ),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"<interpreter>": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def _gpu_facts(device: str) -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {
        "cuda_available": torch.cuda.is_available(),
        "torch_cuda": torch.version.cuda,
    }
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        facts.update(
            name=p.name,
            capability=f"{p.major}.{p.minor}",
            memory_gib=p.total_memory / 2**30,
            multiprocessors=p.multi_processor_count,
            bf16=torch.cuda.is_bf16_supported(),
            devices=torch.cuda.device_count(),
            cudnn=torch.backends.cudnn.version(),
        )
        with_smi = shutil.which("nvidia-smi")
        if with_smi:
            q = subprocess.run(
                [with_smi, "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                check=False,
            )
            facts["nvidia_smi"] = q.stdout.strip()
    else:
        import platform

        facts.update(
            name=f"cpu ({platform.processor() or platform.machine()})", cores=os.cpu_count()
        )
    return facts


def _carried_facts() -> dict[str, Any]:
    """Where each module the image lacks comes from (carried site folder or installed)."""
    import importlib.metadata
    import importlib.util

    out = {}
    for mod, dist in CARRIED_MODULES.items():
        spec = importlib.util.find_spec(mod)
        if spec is None:
            out[mod] = {"found": False}
            continue
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        origin = spec.origin or next(iter(spec.submodule_search_locations or []), "")
        out[mod] = {"found": True, "version": version, "origin": str(origin)}
    return out


def _functional_checks(work: Path) -> dict[str, Any]:
    """The carried packages doing their job: math-verify's equivalence, NetCDF's int64."""
    import xarray as xr

    from llm_validation.evaluate.scoring import is_correct
    from sims.runtime.io import read_netcdf, write_netcdf

    out: dict[str, Any] = {}
    # MATH answers: the strings differ, only math-verify proves 1/2 = 0.5 (and refutes 1/3)
    out["math_verify_equal"] = bool(is_correct("math", r"\frac{1}{2}", "0.5"))
    out["math_verify_unequal"] = not is_correct("math", r"\frac{1}{3}", "0.5")
    # NetCDF-4 keeps int64; the scipy fallback (NetCDF-3) would not
    big = np.array([2**40 + 1, -3], dtype=np.int64)
    path = work / "preflight-int64.nc"
    try:
        write_netcdf(path, xr.Dataset({"x": ("i", big)}))
        back = read_netcdf(path)["x"].values
        out["netcdf_int64"] = bool(back.dtype == np.int64 and (back == big).all())
    except Exception as exc:  # noqa: BLE001 - recorded as a failed check
        out["netcdf_int64"] = False
        out["netcdf_error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def preflight(ctx: Context) -> dict:
    """Versions, the GPU, a bf16 product, the carried wheels and the project's imports.

    Fails (with everything it measured recorded) when a carried package is missing, a
    functional check fails, a module does not import, or the bf16 product's error is above
    1e-2 (expected ~2e-3: bfloat16 rounding of the output).
    """
    from llm_validation.campaign.measure import matmul_check
    from sims.runtime.io import package_versions

    sz = PREFLIGHT_SIZES[ctx.size]
    figs: dict[str, Any] = {
        "packages": package_versions(),
        "gpu": _gpu_facts(ctx.device),
        "python": sys.version.split()[0],
        "activated_wheels": ctx.activated,
        "emulated_image": ctx.emulate_image,
    }
    mm = matmul_check(sz["matmul_n"], device=ctx.device, dtype="bfloat16", reps=sz["matmul_reps"])
    figs["matmul_bf16"] = mm
    figs["carried"] = _carried_facts()
    figs["functional"] = _functional_checks(ctx.work_dir("preflight"))
    site = ctx.work / "carried-site"
    failures = import_check(
        sz["modules"], emulate=ctx.emulate_image, allowed=[site] if site.is_dir() else []
    )
    figs["import_failures"] = failures
    targets = [target("bf16 product relative error", mm["rel_error"], "<=", 1e-2)]
    if not ctx.rehearsal:  # KINDS.md: 798 TFLOP/s seen at n = 8192 on an H100
        targets.append(target("bf16 8192^3 product", mm["tflops"], ">=", 300.0, "TFLOP/s"))
    # gguf is needed only where the SmolLM2 GGUF is used: carried parts, or the GPU confirmation
    uses_gguf = (ctx.carry_dir / "gguf" / carry.MANIFEST).is_file()
    needed = [m for m in CARRIED_MODULES if m != "gguf" or uses_gguf]
    figs["needed_carried_modules"] = needed
    problems = [f"{m} not importable" for m in needed if not figs["carried"][m]["found"]]
    problems += [k for k, v in figs["functional"].items() if v is False]
    problems += [f"import {m}: {e}" for m, e in list(failures.items())[:5]]
    problems += [f"target {t['name']} not met" for t in targets if not t["met"]]
    _write_json(ctx.stage_dir("preflight") / "preflight.json", figs)
    if problems:
        hint = ""
        if any("not importable" in p for p in problems):
            hint = " (carry the wheels: python -m llm_validation campaign --prepare-carry)"
        return {
            "status": "failed",
            "figures": figs,
            "targets": targets,
            "message": "; ".join(problems)[:400] + hint,
        }
    return {"figures": figs, "targets": targets}


# ----------------------------------------------------------------------------- throughput

THROUGHPUT_SIZES = {
    "gpu": dict(
        model=None,
        dtype="bfloat16",
        n_loss=20000,
        loss_batch_tokens=65536,
        train_batch=32,
        train_steps=30,
        n_gen=512,
        new_tokens=256,
        gen_batches=(128, 512),
        tok_vocab=8192,
        opt_models={
            "sosd_gpu": (dict(vocab_size=256, seq_len=256, n_layer=6, n_head=6, d_model=384), 64),
            "bench": (dict(vocab_size=2048, seq_len=128, n_layer=4, n_head=4, d_model=128), 16),
        },
        opt_steps=20,
        opt_warmup=3,
        opt_reps=3,
        optimizers="all",
        markov_steps=30,
    ),
    "toy": dict(
        model=dict(
            hidden_size=64,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=2048,
        ),
        dtype="float32",
        n_loss=400,
        loss_batch_tokens=8192,
        train_batch=8,
        train_steps=4,
        n_gen=16,
        new_tokens=16,
        gen_batches=(8, 16),
        tok_vocab=1024,
        opt_models={"toy": (dict(vocab_size=256, seq_len=32, n_layer=2, n_head=2, d_model=32), 8)},
        opt_steps=3,
        opt_warmup=1,
        opt_reps=1,
        optimizers=("adamw", "sgd", "muon", "sam", "fsam"),
        markov_steps=3,
    ),
    "mini": dict(
        model=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=512,
        ),
        dtype="float32",
        n_loss=48,
        loss_batch_tokens=2048,
        train_batch=4,
        train_steps=2,
        n_gen=4,
        new_tokens=4,
        gen_batches=(4,),
        tok_vocab=400,
        opt_models={"mini": (dict(vocab_size=64, seq_len=16, n_layer=1, n_head=2, d_model=16), 4)},
        opt_steps=2,
        opt_warmup=1,
        opt_reps=1,
        optimizers=("adamw", "fsam"),
        markov_steps=2,
    ),
}
#: Issue 11's targets: trajectories over 20,000 examples in 5 minutes (5 checkpoints), and
#: generation at >= 50 problems/s with 256 new tokens. bench_sam_family's: FSAM <= 2.2x AdamW's
#: time and <= 1.3x its memory.
TRAJECTORY_EXAMPLES, TRAJECTORY_CHECKPOINTS, TRAJECTORY_SECONDS = 20000, 5, 300.0
GEN_TARGET = 50.0
FSAM_TIME, FSAM_MEMORY = 2.2, 1.3


def _tokenizer(ctx: Context, texts: list[str], vocab: int):
    """SmolLM2's tokenizer when it was carried (``.carry/tokenizer``), else a local BPE."""
    folder = ctx.carry_dir / "tokenizer"
    if (folder / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        return tok, "smollm2 (carried)"
    from llm_validation.models.tiny import train_tokenizer

    return train_tokenizer(texts[:4000], vocab_size=vocab), f"local BPE ({vocab} tokens)"


def markov_step(scale: str, device: str, steps: int) -> dict[str, Any]:
    """Seconds per step of seed 004's full model at ``scale`` (the Markov stages' main cost).

    Trains the Figs. 2-3 experiment for ``steps`` steps (one evaluation, no best-predictor
    truths) and projects the stage: 4 models (c = 4, 8, 12 and unrestricted) x the scale's steps.
    """
    from sims.markov import experiments as X
    from sims.markov.train import train

    exp = X.full_exp(scale)
    full = exp.train.steps
    exp = exp.replace(
        train=dataclasses.replace(
            exp.train,
            steps=steps,
            eval_every=steps,
            best_contexts=0,
            n_test=min(exp.train.n_test, 500),
        )
    )
    ds = train(exp, device=device).ds
    sec = float(ds.attrs["step_seconds"])
    return {
        "scale": scale,
        "steps_timed": steps,
        "step_seconds": sec,
        "steps_per_model": full,
        "projected_fig2_3_training_seconds": 4 * full * sec,
    }


def throughput(ctx: Context) -> dict:
    """Loss recording, a fine-tuning step and generation at the targets; optimizer costs.

    * A randomly initialised decoder with SmolLM2-135M's configuration (bf16 on the GPU) reads
      ``n_loss`` generated MathInstruct-format examples (<= 512 tokens) once through
      :func:`llm_validation.train.trainer.per_example_losses`; a trajectory of 20,000 examples with
      5 checkpoints is 100,000 such forwards, so the target is 5 x 20,000 / rate <= 300 s.
      The stricter figure adds one epoch of training (forward, backward, AdamW) over the
      20,000 examples. The mean loss of a random model is ln V plus about half the logits'
      variance ``hidden * initializer_range**2`` (a check of the loss code: 10.80 + ~0.5 nats
      at SmolLM2's V = 49,152, width 576 and init 1/24).
    * Greedy generation of ``n_gen`` GSM8K-format problems with 256 new tokens (a random model
      rarely stops early: the worst case), at each batch size; target >= 50 problems/s.
    * Every :mod:`sims.optim` optimizer on :mod:`sims.lm` decoders (the SoSD GPU configuration
      and the CPU benchmark's): step time and peak memory relative to AdamW; target FSAM
      <= 2.2x time, <= 1.3x memory. AdamW's step at the SoSD GPU configuration is the
      :mod:`sims.lm` step (its 20,000-step run is projected from it).
    """
    import torch

    from llm_validation.campaign import measure as M
    from llm_validation.data.corpus import generate_benchmarks, generate_corpus
    from llm_validation.data.records import Example, format_prompt, tokenize_examples

    sz = THROUGHPUT_SIZES[ctx.size]
    sd = ctx.stage_dir("throughput")
    recs = generate_corpus(sz["n_loss"], seed=11)
    texts = [format_prompt(r["instruction"]) + r["output"] for r in recs]
    tok, tok_name = _tokenizer(ctx, texts, sz["tok_vocab"])
    over = dict(sz["model"] or {})
    over["vocab_size"] = max(over.get("vocab_size", 0), len(tok))  # the carried tokenizer's ids
    cfg = M.smollm2_config(**over)
    model = M.random_causal_lm(cfg, device=ctx.device, dtype=sz["dtype"], seed=0)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    ex = [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(recs)]
    toks = tokenize_examples(ex, tok, max_length=512)
    ctx.say(
        f"  loss recording: {len(toks)} examples, {cfg.num_hidden_layers} layers, "
        f"tokenizer {tok_name}"
    )
    loss = M.loss_recording_rate(
        model, toks, pad_id=tok.pad_token_id, batch_tokens=sz["loss_batch_tokens"]
    )
    loss["loss_minus_lnV"] = loss["mean_loss"] - math.log(cfg.vocab_size)
    gsm = generate_benchmarks(sz["n_gen"], seed=12)["gsm8k"][: sz["n_gen"]]
    prompts = [format_prompt(r["question"]) for r in gsm]
    gen = {}
    for b in sz["gen_batches"]:
        ctx.say(f"  generation: {len(prompts)} problems x {sz['new_tokens']} tokens, batch {b}")
        gen[str(b)] = M.generation_rate(
            model, tok, prompts, new_tokens=sz["new_tokens"], batch_size=b
        )
    ctx.say("  training steps (forward, backward, AdamW)")
    train = M.training_rate(
        model, toks, pad_id=tok.pad_token_id, batch_size=sz["train_batch"], steps=sz["train_steps"]
    )
    del model
    if ctx.device.startswith("cuda"):
        torch.cuda.empty_cache()
    from sims.optim import OPTIMIZERS

    names = list(OPTIMIZERS) if sz["optimizers"] == "all" else list(sz["optimizers"])
    options = {"angle_sam": {"angle_weights": (0.5, 0.5)}}
    opt_tables = {}
    for key, (mcfg, batch) in sz["opt_models"].items():
        ctx.say(f"  optimizer costs on the {key} decoder ({', '.join(names)})")

        def run(name, mode, mcfg=mcfg, batch=batch):
            return M.optimizer_step_cost(
                name,
                mode=mode,
                model=mcfg,
                batch_size=batch,
                steps=sz["opt_steps"],
                warmup=sz["opt_warmup"],
                device=ctx.device,
                options=options.get(name),
            )

        opt_tables[key] = {
            "model": mcfg,
            "batch_size": batch,
            "rows": M.optimizer_cost_table(names, run, reps=sz["opt_reps"]),
        }
    ctx.say("  seed 004 full model, a few steps at the Markov stages' scale")
    mstep = markov_step("paper" if not ctx.rehearsal else "quick", ctx.device, sz["markov_steps"])
    first = next(iter(opt_tables))
    rows = {r["optimizer"]: r for r in opt_tables[first]["rows"]}
    rate = loss["examples_per_s"]
    record_s = TRAJECTORY_CHECKPOINTS * TRAJECTORY_EXAMPLES / rate
    traj_s = record_s + TRAJECTORY_EXAMPLES / train["examples_per_s"]
    best_gen = max(g["prompts_per_s"] for g in gen.values())
    lm_step = rows["adamw"]["median_s_per_step"]
    figs = {
        "model": {
            "config": "SmolLM2-135M" if sz["model"] is None else sz["model"],
            "params": loss["params"],
            "dtype": sz["dtype"],
            "tokenizer": tok_name,
        },
        "loss_recording": loss,
        "training": train,
        "generation": gen,
        "projected_recording_seconds": record_s,
        "projected_trajectory_seconds": traj_s,
        "optimizers": opt_tables,
        "lm_step_seconds": lm_step,
        "lm_step_model": first,
        "projected_sosd_run_seconds": lm_step * 20000,
        "markov_step": mstep,
    }
    targets = [
        target("loss recording, 5 x 20,000 examples", record_s, "<=", TRAJECTORY_SECONDS, "s"),
        target("trajectory with one training epoch", traj_s, "<=", TRAJECTORY_SECONDS, "s"),
        target(
            f"generation at {sz['new_tokens']} new tokens (best batch)",
            best_gen,
            ">=",
            GEN_TARGET,
            "problems/s",
        ),
    ]
    targets.append(
        target(
            "Markov Figs. 2-3 training, projected (the stage's plan: 420 s)",
            mstep["projected_fig2_3_training_seconds"],
            "<=",
            420.0,
            "s",
        )
    )
    if "fsam" in rows:
        targets += [
            target(
                f"FSAM/AdamW step time ({first})", rows["fsam"]["time_ratio"], "<=", FSAM_TIME, "x"
            ),
            target(
                f"FSAM/AdamW peak memory ({first})",
                rows["fsam"]["memory_ratio"],
                "<=",
                FSAM_MEMORY,
                "x",
            ),
        ]
    _write_json(sd / "throughput.json", {"figures": figs, "targets": targets})
    header = ["model", "optimizer", "median_s_per_step", "time_ratio", "peak_bytes", "memory_ratio"]
    _write_csv(
        sd / "optimizers.csv",
        header,
        [
            [
                k,
                r["optimizer"],
                r["median_s_per_step"],
                r["time_ratio"],
                r["peak_bytes"],
                r["memory_ratio"],
            ]
            for k, t in opt_tables.items()
            for r in t["rows"]
        ],
    )
    if ctx.rehearsal:  # targets are for the GPU: on a CPU they are reported, not required
        return {
            "figures": figs,
            "targets": targets,
            "message": "targets are GPU targets (reported, not required on a CPU)",
        }
    return {"figures": figs, "targets": targets}


# -------------------------------------------------------------------------------- markov


def markov_summary(ds) -> tuple[dict, list[str], list[list]]:
    """Stage times and curves of a seed-004 training dataset (Figs. 2-3, 8-9).

    Small enough to commit: ``(figures, csv header, csv rows)`` with one row per evaluation.
    """
    from sims.markov.train import detect_stages

    rep = detect_stages(ds)
    steps = ds["step"].values
    kl = ds["kl_restricted"].values
    header = ["step", "test_loss", "excess_loss"] + [
        f"kl_restricted_{i + 1}" for i in range(kl.shape[1])
    ]
    cols = [ds["test_loss"].values, ds["excess_loss"].values] + [
        kl[:, i] for i in range(kl.shape[1])
    ]
    refs = []
    if "kl_reference" in ds and ds.sizes.get("reference", 0):
        refs = [str(r) for r in ds["reference"].values]
        header += [f"kl_reference_{r}" for r in refs]
        cols += [ds["kl_reference"].values[:, i] for i in range(len(refs))]
    gm = ds["group_mass"].values.max(1)  # best head's mass per group
    header += [f"group_mass_{g + 1}" for g in range(gm.shape[1])]
    cols += [gm[:, g] for g in range(gm.shape[1])]
    rows = [[int(s)] + [float(c[i]) for c in cols] for i, s in enumerate(steps)]
    order_refs = None
    if refs:  # which restricted-context model is closest at each evaluation
        closest = np.nanargmin(ds["kl_reference"].values, axis=1)
        firsts = [
            int(steps[np.argmax(closest == i)]) if (closest == i).any() else None
            for i in range(len(refs))
        ]
        order_refs = {"first_step_closest": dict(zip(refs, firsts, strict=True))}
    figs = {
        "group_times": rep.group_times,
        "kl_times": rep.kl_times,
        "n_stages": rep.n_stages,
        "order_ok": rep.order_ok,
        "heads_on_first_group": rep.heads_on_first,
        "final_head_groups": rep.final_assignment,
        "n_patterns": rep.n_patterns,
        "final_excess_loss": float(ds["excess_loss"].values[-1]),
        "final_test_loss": float(ds["test_loss"].values[-1]),
        "steps": int(steps[-1]),
        "seconds": ds.attrs.get("seconds"),
        "step_seconds": ds.attrs.get("step_seconds"),
        "lr_warning": ds.attrs.get("lr_warning"),
        "status": ds.attrs.get("status"),
    }
    if order_refs:
        figs.update(order_refs)
    return figs, header, rows


def _markov_stage(name: str):
    """A stage that runs seed 004's figure ``name`` at the paper scale (``quick`` in rehearsals).

    The computation and its result file are the figure's own
    (:data:`sims.markov.experiments.FIGURE_RUNS`), on the campaign's device; the result (with
    provenance) goes to ``work/markov/results/markov/<scale>/``, where ``python -m figures``
    with ``MARKOV_SCALE`` set finds it, and Figure 5's finished runs are kept in its
    ``.parts`` folder, so a cut stage resumes.
    """

    def stage(ctx: Context) -> dict:
        from sims.markov.experiments import FIGURE_RUNS

        scale = "quick" if ctx.rehearsal else "paper"
        wd = ctx.work_dir("markov")
        ds = FIGURE_RUNS[name].run(wd / "results", scale, device=ctx.device)
        sd = ctx.stage_dir(name)
        if name == "markov_fig5":
            figs, header, rows = _fig5_summary(ds)
        else:
            figs, header, rows = markov_summary(ds)
        figs["scale"] = scale
        _write_json(sd / f"{name}.json", figs)
        _write_csv(sd / f"{name}.csv", header, rows)
        return {"figures": figs}

    stage.__name__ = name
    return stage


def _fig5_summary(ds) -> tuple[dict, list[str], list[list]]:
    """Per (size, seed): stage counts, best step and excess loss, nearest restricted model."""
    keys = [
        "n_stages",
        "n_stages_min",
        "n_stages_max",
        "n_stages_at_best",
        "best_step",
        "best_excess",
        "closest_at_best",
    ]
    rows = []
    for size in ds["size"].values:
        for seed in ds["seed"].values:
            sel = ds.sel(size=size, seed=seed)
            rows.append([int(size), int(seed)] + [float(sel[k].values) for k in keys])
    figs = {
        "sizes": [int(s) for s in ds["size"].values],
        "seeds": [int(s) for s in ds["seed"].values],
        "n_stages": ds["n_stages"].values,
        "best_excess": ds["best_excess"].values,
        "kl_to": ds.attrs.get("kl_to"),
    }
    return figs, ["size", "seed", *keys], rows


# ------------------------------------------------------------------------------- confirm


def smollm2_gguf(ctx: Context) -> Path:
    """The SmolLM2 GGUF on this machine: assembled from the carried parts (verified), or found.

    Raises:
        llm_validation.campaign.carry.CarryError: naming the missing or corrupt parts.
    """
    dest = ctx.work / "models" / SMOLLM2_GGUF
    parts = ctx.carry_dir / "gguf"
    if (parts / carry.MANIFEST).is_file():
        return carry.assemble(parts, dest)
    if dest.is_file():
        return dest
    raise carry.CarryError(
        f"no SmolLM2 GGUF: neither carried parts in {str(parts)!r} (python -m llm_validation "
        f"campaign --prepare-carry here, then carry them) nor {str(dest)!r}."
    )


#: The confirmation's conditions (issue 36's design, as the ``cpu`` scale's): FT, FT+UP and FT
#: for FT+UP's steps (``ft_matched``: "upsampling helps" apart from "training longer helps"),
#: 10 fine-tuning seeds on one pre-trained base at the GPU sizes.
CONFIRM_VARIANTS = ("ft", "ft_up", "ft_matched")
#: Fine-tuning seeds of the GPU sizes (issue 36: >= 10).
CONFIRM_SEEDS = tuple(range(10))
#: The from-scratch GPU scale of :data:`llm_validation.experiments.confirm.SCALES`.
GPU_SCRATCH_SCALE = "gpu-scratch"


def confirm_config(ctx: Context, model: str, spec: str | None = None):
    """The confirmation's :class:`~llm_validation.experiments.confirm.ConfirmConfig` at a size.

    The size is ``ctx.size``.

    * ``gpu`` + ``smollm2``: the ``gpu`` scale with SmolLM2-135M-Instruct (the only real model
      that can be carried) as target and proxy (proxy = target, the paper's Fig. 4a setting),
      LoRA r=128, 2000 fine-tuning problems, 100 per benchmark, 300 held-out problems.
    * ``gpu`` + ``scratch``: :mod:`llm_validation.experiments.confirm`'s ``gpu-scratch`` scale
      (from-scratch models sized for an H100, nothing carried).
    * ``toy`` / ``mini``: the ``quick`` scale (three seeds / one seed).
    Variants: :data:`CONFIRM_VARIANTS` (``mini``: FT, FT+UP); at the ``gpu`` size issue 36's
    design: :data:`CONFIRM_SEEDS` (10 fine-tuning seeds), 300 items per format, learning times
    on a log-spaced schedule, the selection check and per-item results (``toy``: 3 seeds,
    ``mini``: one). Not timed on a GPU: 30 fine-tuning runs where issue 29's took 15.
    """
    from llm_validation.experiments.confirm import SCALES

    five = CONFIRM_VARIANTS
    if ctx.size == "gpu" and model == "smollm2":
        return dataclasses.replace(
            SCALES["gpu"],
            name="campaign-smollm2",
            target=spec,
            proxy=spec,
            n_train=2000,
            n_test=300,
            n_heldout=650,
            heldout_acc_per_source=50,
            variants=five,
            seeds=CONFIRM_SEEDS,
            workers=4,
        )
    if ctx.size == "gpu":
        return dataclasses.replace(
            SCALES[GPU_SCRATCH_SCALE], name="campaign-scratch", variants=five, seeds=CONFIRM_SEEDS
        )
    if ctx.size == "toy":
        return dataclasses.replace(
            SCALES["quick"], name="campaign-toy", variants=five, seeds=(0, 1, 2), workers=1
        )
    return dataclasses.replace(
        SCALES["quick"],
        name="campaign-mini",
        variants=("ft", "ft_up"),
        seeds=(0,),
        n_train=120,
        n_test=3,
        n_heldout=24,
        workers=1,
    )


def rehearse_carry(folder: Path, *, size_bytes: int = 5 * carry.MIB // 2) -> dict[str, Any]:
    """The parts protocol on a synthetic GGUF-like file, command by command.

    Splits it into 1 MiB parts; "carries" the manifest and one part per command into a second
    folder (as consecutive device commands do); checks that assembling before the last part
    names the missing parts, that the assembled file's SHA-256 is the original's, and that a
    corrupted part is refused.
    """
    rng = np.random.default_rng(0)
    src = folder / "synthetic.gguf"
    folder.mkdir(parents=True, exist_ok=True)
    src.write_bytes(b"GGUF" + rng.integers(0, 256, size_bytes - 4, dtype=np.uint8).tobytes())
    here, there = folder / "here", folder / "there"
    shutil.rmtree(there, ignore_errors=True)
    man = carry.split_file(src, here, part_bytes=carry.MIB)
    missing_named = []
    for k, part in enumerate(man.parts):
        there.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(here / carry.MANIFEST, there / carry.MANIFEST)
        shutil.copyfile(here / part.name, there / part.name)
        if k < len(man.parts) - 1:
            try:
                carry.assemble(there, folder / "assembled.gguf")
            except carry.CarryError as exc:
                missing_named.append(all(p.name in str(exc) for p in man.parts[k + 1 :]))
    out = carry.assemble(there, folder / "assembled.gguf")
    same = carry.sha256_file(out) == carry.sha256_file(src)
    bad = bytearray((there / man.parts[0].name).read_bytes())
    bad[10] ^= 0xFF
    (there / man.parts[0].name).write_bytes(bytes(bad))
    (folder / "assembled.gguf").unlink()
    try:
        carry.assemble(there, folder / "assembled.gguf")
        corrupt_refused = False
    except carry.CarryError as exc:
        corrupt_refused = man.parts[0].name in str(exc) and "corrupt" in str(exc)
    return {
        "parts": len(man.parts),
        "bytes": man.size,
        "sha256_matches": same,
        "missing_parts_named": bool(missing_named) and all(missing_named),
        "corrupt_part_refused": corrupt_refused,
    }


#: A sentence any pretrained English LM predicts far better than chance (ln 49,152 = 10.8 nats).
PROBE_TEXT = (
    "The capital of France is Paris. The capital of Germany is Berlin. The capital "
    "of Italy is Rome."
)


def _smollm2_cpu_check(ctx: Context, gguf: Path) -> dict[str, Any]:
    """Rehearsal only: convert the real GGUF on the CPU, score a sentence, answer a problem.

    A correct dequantization gives a loss of a few nats on :data:`PROBE_TEXT`; a broken one
    (wrong block layout, scales) gives about ln V, i.e. chance.
    """
    import torch

    from llm_validation.data.records import format_prompt
    from llm_validation.evaluate.generation import generate
    from llm_validation.models.registry import load_model, resolve_model

    t0 = time.perf_counter()
    folder = resolve_model(gguf, cache_dir=ctx.work / "models" / "hf", progress=not ctx.quiet)
    t1 = time.perf_counter()
    model, tok = load_model(folder, device="cpu", dtype="float32")
    ids = tok(PROBE_TEXT, return_tensors="pt").input_ids
    with torch.no_grad():
        loss = float(model(input_ids=ids, labels=ids).loss)
    answer = generate(
        model, tok, [format_prompt("What is 2 + 3?")], max_new_tokens=16, batch_size=1
    )[0]
    return {
        "convert_seconds": t1 - t0,
        "params": sum(p.numel() for p in model.parameters()),
        "probe_loss": loss,
        "ln_vocab": math.log(model.config.vocab_size),
        "answer": answer,
    }


def _run_and_summarize(ctx: Context, stage: str, cfg, figs: dict) -> dict:
    """Run ``cfg``'s confirmation; write ``accuracy.csv``, ``heldout.csv``, ``<stage>.json``."""
    from llm_validation.experiments.confirm import paired_ci, run_confirmation

    wd = ctx.work_dir(stage)
    figs.update(
        config_name=cfg.name,
        variants=list(cfg.variants),
        seeds=list(cfg.seeds),
        n_train=cfg.n_train,
        n_test=cfg.n_test,
        n_heldout=cfg.n_heldout,
    )
    missing = [v for v in CONFIRM_VARIANTS if v not in cfg.variants]
    if missing and ctx.size != "mini":
        figs["variants_not_defined"] = missing
    ctx.say(
        f"  confirmation: {figs['model']} models, variants {', '.join(cfg.variants)}, seeds "
        f"{list(cfg.seeds)}"
    )
    ds = run_confirmation(cfg, wd / cfg.name, quiet=ctx.quiet)
    sd = ctx.stage_dir(stage)
    acc = ds["accuracy"]
    _write_csv(
        sd / "accuracy.csv",
        ["variant", "seed", "benchmark", "accuracy"],
        [
            [str(v), int(s), str(b), float(acc.sel(variant=v, seed=s, benchmark=b))]
            for v in acc["variant"].values
            for s in acc["seed"].values
            for b in acc["benchmark"].values
        ],
    )
    avg = {
        str(v): (100 * acc.sel(variant=v).mean("benchmark").values).tolist()
        for v in acc["variant"].values
    }
    figs["avg_accuracy_points"] = avg
    figs["pt_avg_accuracy_points"] = float(100 * np.nanmean(ds["pt_accuracy"].values))
    held = {}
    if "heldout_loss" in ds:
        h = ds["heldout_loss"]
        held = {
            str(v): np.nanmean(h.sel(variant=v).values, axis=-1).tolist()
            for v in h["variant"].values
        }
        _write_csv(
            sd / "heldout.csv",
            ["variant", "seed", "mean_heldout_loss"],
            [[v, int(s), held[v][j]] for v in held for j, s in enumerate(h["seed"].values)],
        )
        figs["heldout_loss"] = held
        figs["pt_heldout_loss"] = float(np.nanmean(ds["pt_heldout_loss"].values))
    diffs = {}
    for a, b in (
        ("ft_up", "ft"),
        ("ft_up", "ft_matched"),
        ("ft_matched", "ft"),
        ("random", "ft"),
        ("easy", "ft"),
    ):
        if a in avg and b in avg:
            m, lo, hi = paired_ci(np.asarray(avg[a]) - np.asarray(avg[b]))
            d = {"accuracy_points": [m, lo, hi]}
            if held:
                m2, lo2, hi2 = paired_ci(np.asarray(held[a]) - np.asarray(held[b]))
                d["heldout_loss"] = [m2, lo2, hi2]
            diffs[f"{a}-{b}"] = d
    from llm_validation.experiments.confirm.report import item_diffs

    for a, b in (("ft_up", "ft_matched"), ("ft_up", "ft")):  # issue 36: items resampled too
        if f"{a}-{b}" in diffs and "item_correct" in ds:
            diffs[f"{a}-{b}"]["accuracy_points_items"] = item_diffs(ds, a, b)
    figs["paired_differences"] = diffs
    figs["selection_check"] = json.loads(ds.attrs.get("selection_check", "{}"))
    figs["seconds_this_call"] = float(ds.attrs.get("seconds_total_this_call", float("nan")))
    report = wd / cfg.name / "report.md"
    if report.is_file():
        shutil.copyfile(report, sd / "report.md")
    _write_json(sd / f"{stage}.json", figs)
    return figs


def confirm(ctx: Context) -> dict:
    """FT, FT+UP and FT for FT+UP's steps, 10 fine-tuning seeds, from scratch (issue 36).

    Needs nothing carried but the wheels: the models are built and pre-trained on the
    generated corpus within the stage (:func:`confirm_config`, ``scratch``), so the first
    lease returns a 10-seed accuracy and held-out loss result even when the GGUF cannot be
    carried. Runs :func:`llm_validation.experiments.confirm.run_confirmation`.
    """
    figs: dict[str, Any] = {"model": "scratch"}
    if ctx.size == "gpu":
        figs["config_source"] = f"llm_validation.experiments.confirm.SCALES[{GPU_SCRATCH_SCALE!r}]"
    figs = _run_and_summarize(ctx, "confirm", confirm_config(ctx, "scratch"), figs)
    return {"figures": figs}


def confirm_smollm2(ctx: Context) -> dict:
    """The same confirmation with SmolLM2-135M-Instruct and LoRA, from its carried GGUF.

    On the GPU: assembles the GGUF from the parts the lease's commands carried (each part and
    the whole checked by SHA-256; a missing part fails the stage naming it), converts it and
    runs :func:`confirm_config` (``smollm2``).

    Rehearsals check what a CPU can: the parts protocol on a synthetic file, command by
    command; and, when the real GGUF's parts were carried and ``gguf`` is importable, the
    assembled file converted on the CPU (a sentence scored, a problem answered) and the
    GPU configuration built. The LoRA fine-tuning itself runs only on the GPU.
    """
    import importlib.util

    figs: dict[str, Any] = {"model": "smollm2"}
    wd = ctx.work_dir("confirm_smollm2")
    if ctx.rehearsal:
        figs["carry_protocol"] = cp = rehearse_carry(wd / "carry-rehearsal")
        real = (ctx.carry_dir / "gguf" / carry.MANIFEST).is_file()
        if real and importlib.util.find_spec("gguf") is not None and ctx.size == "toy":
            chk = _smollm2_cpu_check(ctx, smollm2_gguf(ctx))
            figs["smollm2_cpu_check"] = chk
            gpu = confirm_config(dataclasses.replace(ctx, size="gpu"), "smollm2", "<converted>")
            figs["gpu_config"] = {
                "variants": list(gpu.variants),
                "seeds": list(gpu.seeds),
                "lora": gpu.finetune.lora,
            }
        figs["rehearsal_only"] = "carry and conversion checked; LoRA fine-tuning runs on a GPU"
        _write_json(ctx.stage_dir("confirm_smollm2") / "confirm_smollm2.json", figs)
        if not (cp["sha256_matches"] and cp["missing_parts_named"] and cp["corrupt_part_refused"]):
            return {"status": "failed", "figures": figs, "message": f"carry protocol: {cp}"}
        chk = figs.get("smollm2_cpu_check")
        if chk and not chk["probe_loss"] < 4.0:
            return {
                "status": "failed",
                "figures": figs,
                "message": "the converted SmolLM2 "
                f"predicts the probe sentence at {chk['probe_loss']:.2f} nats (chance: "
                f"{chk['ln_vocab']:.2f}): broken conversion",
            }
        return {"figures": figs, "message": figs["rehearsal_only"]}
    from llm_validation.models.registry import resolve_model

    gguf = smollm2_gguf(ctx)  # CarryError naming the missing parts: the stage fails
    spec = str(resolve_model(gguf, cache_dir=ctx.work / "models" / "hf", progress=not ctx.quiet))
    figs = _run_and_summarize(ctx, "confirm_smollm2", confirm_config(ctx, "smollm2", spec), figs)
    return {"figures": figs}


# ---------------------------------------------------------------------------------- sosd

SOSD_SIZES = {
    "gpu": dict(
        scale="gpu",
        names=("constant", "wsd", "wsd_muon", "step", "cosine", "cosine_wd"),
        seeds=(0, 1, 2),
    ),
    "toy": dict(scale="quick", names=("constant", "wsd"), seeds=(0,)),
    "mini": dict(scale="quick", names=("constant",), seeds=(0,)),
}


#: The SoSD stage's time for its runs in one call (a run that would not fit waits for the next).
SOSD_SECONDS = 510


def sosd(ctx: Context) -> dict:
    """Seed 002's LM runs (:data:`sims.sosd.bridge.LM_EXPERIMENTS`) at their GPU configuration.

    Runs the (name, seed) runs (:func:`sims.sosd.bridge.lm_sosd_runs`) on the campaign's
    device (``cuda`` at the GPU size, the CPU in rehearsals) in priority order until the stage's
    time is up (each finished run is kept; a rerun continues), and copies each run's summary
    (onset, loss knee, ΔΣ levels, final validation loss) into the stage folder.
    """
    from sims.runtime.io import read_json
    from sims.sosd.bridge import lm_sosd_dir, lm_sosd_runs

    sz = SOSD_SIZES[ctx.size]
    wd = ctx.work_dir("sosd") / "results"
    sd = ctx.stage_dir("sosd")
    t_start = time.perf_counter()
    per_run = []
    todo = [(n, s) for s in sz["seeds"] for n in sz["names"]]
    done = 0
    for name, seed in todo:
        stem = lm_sosd_dir(wd, sz["scale"]) / f"{name}_seed{seed}"
        if not Path(f"{stem}.json").exists():
            spent = time.perf_counter() - t_start
            est = (spent / len(per_run)) if per_run else 0.0
            budget = min(SOSD_SECONDS, ctx.remaining())
            if not ctx.rehearsal and per_run and spent + est > budget:
                break
            t0 = time.perf_counter()
            lm_sosd_runs(wd, scale=sz["scale"], names=(name,), seeds=(seed,), device=ctx.device)
            per_run.append(time.perf_counter() - t0)
            if read_json(f"{stem}.json").get("meta", {}).get("status") != "success":
                for p in stem.parent.glob(f"{stem.name}.*"):
                    p.unlink()  # a cancelled run must not count as finished
                raise KeyboardInterrupt(f"run {name} seed {seed} was cut short")
        shutil.copyfile(f"{stem}.json", sd / f"{name}_seed{seed}.json")
        done += 1
    runs = {}
    for p in sorted(sd.glob("*_seed*.json")):
        d = read_json(p)
        runs[p.stem] = {
            k: d.get(k)
            for k in ("onset", "loss_knee", "sync_gap", "val_loss_final", "a4_ratio_max")
            if k in d
        }
    figs = {
        "scale": sz["scale"],
        "runs": runs,
        "done": done,
        "total": len(todo),
        "seconds_per_run": per_run,
    }
    _write_json(sd / "sosd.json", figs)
    if done < len(todo):
        return {
            "status": "partial",
            "figures": figs,
            "message": f"{done} of {len(todo)} runs; rerun with --stage sosd to continue",
        }
    return {"figures": figs}


# -------------------------------------------------------------------------------- registry

STAGES = (
    StageSpec(
        "preflight",
        "versions, the GPU, a bf16 product, carried wheels, the project's imports",
        30,
        "the carried wheels (.carry/wheels); nothing else",
        "imports of ~100 modules (~12 CPU-s here), wheel unpacking (~3 s), 23 products of "
        "8192^3 (~0.1 s at 800 TFLOP/s); folded into the first command of every lease",
        preflight,
        gate=True,
        always=True,
    ),
    StageSpec(
        "confirm",
        "upsampling confirmation from scratch: FT, FT+UP, FT at FT+UP's steps x 10 seeds "
        "(accuracy and held-out loss); nothing carried but the wheels",
        510,
        "wheels (math-verify); nothing else: models pre-trained on the generated corpus here",
        "llm_validation.experiments.confirm's gpu-scratch scale (its sizing, not run): "
        "pre-training of a ~27M-parameter target (width 512, 8 layers) and a ~1M proxy on 60,000 "
        "generated "
        "problems, 3 proxy runs, 15 fine-tunes + evaluations, 4 processes sharing the GPU; "
        "resumes from its job store while the machine is warm",
        confirm,
    ),
    StageSpec(
        "confirm_smollm2",
        "the same confirmation with SmolLM2-135M-Instruct and LoRA (proxy = target)",
        510,
        "wheels (gguf); every GGUF part (.carry/gguf), spread over the lease's commands",
        "GGUF conversion ~30 s; 3 proxy runs (1 epoch + 15 loss recordings of 1,900 examples) "
        "~45 s each; 15 LoRA fine-tunes (~190 steps) + evaluations (600 problems x 128 tokens) "
        "~50 s each, 4 processes sharing the GPU: ~450 s; resumes from its job store if cut",
        confirm_smollm2,
        carries=("wheels", "gguf"),
    ),
    StageSpec(
        "throughput",
        "loss recording, a training step and generation at issue 11's targets "
        "(SmolLM2-135M shapes); SAM-family cost on the GPU; the sims.lm step",
        360,
        "wheels; optionally SmolLM2's tokenizer (.carry/tokenizer)",
        "20,000 forwards of a 135M model at ~300 tokens: 3.6e15 FLOP, ~30-60 s at 100 TFLOP/s "
        "effective; generation 2 x 512 problems x 256 tokens at ~25 ms per token step: ~40 s; "
        "9 optimizers x 2 decoders x 4 measurements x ~25 steps: ~60 s; model building, warm-ups",
        throughput,
        carries=("wheels", "tokenizer"),
    ),
    StageSpec(
        "markov_fig2_3",
        "seed 004 Figures 2-3 at the paper's scale (full model, d = 50, batch "
        "3000, 2000 steps; KL to c = 4, 8, 12 restricted-context models)",
        420,
        "wheels (netCDF4); MARKOV_SCALE=paper on CUDA",
        "4 one-block models x 2000 steps at ~10-15 ms (overhead-bound) + 100 evaluations each: "
        "~4 x 45 s; best restricted truths by Monte Carlo once (1-4 min of CPU at d = 50)",
        _markov_stage("markov_fig2_3"),
    ),
    StageSpec(
        "markov_fig8_9",
        "seed 004 Figures 8-9 at the paper's scale (reversed importance order)",
        300,
        "wheels (netCDF4); MARKOV_SCALE=paper on CUDA",
        "1 model x 2000 steps (~45 s) + best restricted truths of a new chain (1-4 min CPU)",
        _markov_stage("markov_fig8_9"),
    ),
    StageSpec(
        "markov_fig5",
        "seed 004 Figure 5 at the paper's scale (4 dataset sizes; KL to trained "
        "restricted-context models)",
        510,
        "wheels (netCDF4); MARKOV_SCALE=paper on CUDA",
        "4 sizes x 4 models x ~45 s = ~720 s: may need two commands (finished (size, seed) "
        "runs are kept in the result's .parts folder and the stage resumes)",
        _markov_stage("markov_fig5"),
    ),
    StageSpec(
        "sosd",
        "seed 002 Figs. 2-5 LM runs at the GPU configuration (6 layers, width 384, "
        "T = 256, 20,000 steps), as many as fit",
        SOSD_SECONDS,
        "CUDA (sims.lm.train_lm trains on the campaign's device); nothing carried",
        "18 runs of 20,000 steps; ~4-5 min each if a step takes ~10 ms: one or two per command",
        sosd,
    ),
)


def stage_names() -> list[str]:
    """The stage names in campaign order."""
    return [s.name for s in STAGES]
