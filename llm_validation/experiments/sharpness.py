r"""Seed 003's sharpness diagnostics on a real pretrained LM along a short LoRA fine-tune.

Does the logit path dominate the SAM sharpness gradient (``τ_logit ≈ 1``, seed 003 §4, eq. 9)
on real pretrained weights? This module measures, on a fixed probe batch, the τ fractions of
``H_L ε*`` (``ε* = g/‖g‖``) and ``λ_max(H_L)`` (Lanczos) at chosen optimizer steps of the
pipeline's own LoRA fine-tuning (:func:`llm_validation.train.finetune.finetune`), with a
:class:`SharpnessRecorder` ``TrainerCallback``; every derivative comes from
:mod:`sims.optim.diagnostics` (``functionalize``, ``cross_entropy_loss``, ``tau_fractions``,
``lambda_max``, ``logit_statistics``).

**With respect to what.** The parameter set ``"lora"`` is the trainable LoRA adapters
(``A`` and ``B`` of every adapted module): the parameters the fine-tune moves and that a SAM
perturbation would perturb. Note that LoRA's factorization ``W + (α/r) B A`` is itself
bilinear, so the functional Hessian over the adapters contains the term
``(α/r) ∇_W L`` contracted across ``A`` and ``B`` (seed 003 eq. 8 with ``∂²Z/∂A∂B ≠ 0``) even
when ``Z`` were linear in ``W``; a base-weight set (a regular expression over parameter names,
or ``"last_mlp"``: the last decoder block's feed-forward weights, with the adapters held at
their current values) measures the same split in the network's own coordinates.

**Loss.** The pipeline's: prompt + response + EOS tokenized by
:func:`llm_validation.data.records.tokenize_examples`, right-padded by
:func:`llm_validation.train.trainer.collate`, next-token cross-entropy averaged over the labelled
(response) tokens of the whole batch, i.e. the Hugging Face ``loss`` of the same batch.

**Numerics.** Forward-mode AD needs explicit attention: measurements switch the model to
``"eager"`` attention and eval mode (no dropout) and restore both. ``dtype=None`` measures in the
model's own precision (float32 for the pipeline's CPU runs); ``"float64"`` measures on a
double-precision copy. Each τ measurement also reports ``check_residual``
(``‖δ_logit + δ_func − H_L ε*‖/‖H_L ε*‖`` against an independent HVP of the loss): the
fractions sum to 1 by construction, the residual says whether they are trustworthy.

Examples:
    >>> PARAM_SETS
    ('lora', 'last_mlp')
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

__all__ = [
    "PARAM_SETS",
    "probe_batch",
    "select_params",
    "measure_sharpness",
    "SharpnessRecorder",
    "check_steps",
    "sharpness_along_finetune",
]

#: Named parameter sets (any other string is a regular expression over parameter names).
PARAM_SETS = ("lora", "last_mlp")

#: Fields of one measurement (per step and parameter set).
FIELDS = (
    "tau_logit", "tau_func", "tau_cross", "lambda_max", "loss", "grad_norm",
    "sharpness_grad_norm", "curvature", "check_residual", "n_params", "seconds_tau",
    "seconds_lambda", "cpu_seconds",
)  # fmt: skip
#: Probe logit statistics per step (:func:`sims.optim.diagnostics.logit_statistics`).
LOGIT_FIELDS = ("entropy", "max_prob", "one_minus_p_sq", "p_true")


def probe_batch(examples: Sequence, tokenizer, *, max_length: int = 128) -> dict[str, torch.Tensor]:
    """The probe batch: ``examples`` tokenized and padded exactly as the fine-tune sees them.

    Args:
        examples: :class:`llm_validation.data.records.Example` objects.
        tokenizer: the model's tokenizer.
        max_length: tokens per sequence (longer ones are cut on the right).

    Returns:
        ``{"input_ids", "attention_mask", "labels"}`` (``-100`` on prompt and padding).

    Raises:
        ValueError: for no examples, or no labelled token left after truncation.
    """
    from llm_validation.data.records import tokenize_examples
    from llm_validation.train.trainer import collate

    if len(examples) == 0:
        raise ValueError("`probe` must hold at least one example; got none.")
    records = tokenize_examples(examples, tokenizer, max_length=max_length)
    if sum(r["n_response"] for r in records) == 0:
        raise ValueError(
            f"no response token of the probe fits in `max_length`={max_length}; raise it."
        )
    return collate(records, tokenizer.pad_token_id)


def _hf(model):
    """The Hugging Face model under a PEFT wrapper (or ``model`` itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _resolve_pattern(model, which: str) -> str:
    if which == "last_mlp":
        n = int(_hf(model).config.num_hidden_layers)
        return rf"\.layers\.{n - 1}\.mlp\..*weight$"
    return which


def select_params(model, which: str = "lora") -> dict[str, torch.Tensor]:
    """The parameters the diagnostics differentiate with respect to (detached).

    Args:
        model: a causal LM, PEFT-wrapped for ``"lora"``.
        which: ``"lora"`` (every trainable parameter, i.e. the adapters of a PEFT model),
            ``"last_mlp"`` (the last decoder block's feed-forward weights) or a regular
            expression searched in the parameter names (e.g. frozen base weights).

    Raises:
        ValueError: when ``which`` selects nothing (or is not a valid regular expression).
    """
    if not isinstance(which, str) or not which:
        raise ValueError(f"`params` must be 'lora', 'last_mlp' or a regex; got {which!r}.")
    named = list(model.named_parameters())
    if which == "lora":
        out = {n: p.detach() for n, p in named if p.requires_grad}
        if not out:
            raise ValueError(
                "`params`='lora' but the model has no trainable parameters; wrap it with "
                "llm_validation.models.lora.apply_lora (or unfreeze the weights to measure)."
            )
        return out
    pattern = _resolve_pattern(model, which)
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"`params`={which!r} is not a valid regular expression: {exc}.") from None
    out = {n: p.detach() for n, p in named if rx.search(n)}
    if not out:
        examples = ", ".join(n for n, _ in named[:3])
        raise ValueError(
            f"`params`={which!r} (pattern {pattern!r}) matches no parameter of this "
            f"model; names look like: {examples}, ..."
        )
    return out


@contextlib.contextmanager
def _measuring(model):
    """Eval mode and eager attention (forward-mode AD) for the duration; both restored."""
    hf = _hf(model)
    old = getattr(hf.config, "_attn_implementation", None)
    was_training = model.training
    if old not in (None, "eager"):
        hf.set_attn_implementation("eager")
        if hf.config._attn_implementation != "eager":
            raise ValueError(
                f"cannot switch this {type(hf).__name__} to eager attention (it uses {old!r}); "
                "load it with attn_implementation='eager'."
            )
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
        if old not in (None, "eager"):
            hf.set_attn_implementation(old)


_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def measure_sharpness(
    model,
    batch: dict[str, torch.Tensor],
    *,
    params: str = "lora",
    lanczos_iters: int = 8,
    dtype: str | None = None,
    check: bool = True,
    seed: int = 0,
) -> dict[str, float]:
    """τ fractions (seed 003 eq. 9) and ``λ_max(H_L)`` of ``model`` on ``batch``.

    The logit model is ``θ ↦ Z[:, :-1]`` with targets ``labels[:, 1:]`` (next-token), the loss
    the mean cross-entropy over labelled tokens; ``θ`` is :func:`select_params`'s set, all
    other weights fixed at their current values.

    Args:
        model: a causal LM (PEFT-wrapped for ``params="lora"``).
        batch: from :func:`probe_batch`.
        params: see :func:`select_params`.
        lanczos_iters: Krylov dimension of the Lanczos estimate of ``λ_max``, started from
            the gradient (a lower bound that converges from below and is at least the curvature
            along the gradient; 0 skips it and reports NaN).
        dtype: ``None`` (the model's), ``"float32"`` or ``"float64"`` (measured on a copy).
        check: also compute ``H_L ε*`` by an independent HVP (``check_residual``).
        seed: seed of the Lanczos start vector.

    Returns:
        ``{field: value}`` for :data:`FIELDS` (``n_params`` = size of the parameter set;
        ``seconds_*`` wall-clock, ``cpu_seconds`` this process's CPU time, all threads).

    Raises:
        ValueError: for bad arguments, an empty parameter set, or a vanishing gradient.
    """
    from sims.optim import diagnostics as dg

    if isinstance(lanczos_iters, bool) or not isinstance(lanczos_iters, int) or lanczos_iters < 0:
        raise ValueError(f"`lanczos_iters` must be an int >= 0; got {lanczos_iters!r}.")
    if dtype is not None and dtype not in _DTYPES:
        raise ValueError(f"`dtype` must be None, 'float32' or 'float64'; got {dtype!r}.")
    missing = {"input_ids", "attention_mask", "labels"} - set(batch)
    if missing:
        raise ValueError(f"`batch` lacks {sorted(missing)}; build it with probe_batch().")
    select_params(model, params)  # validate before copying anything
    if dtype is not None and next(model.parameters()).dtype != _DTYPES[dtype]:
        model = copy.deepcopy(model).to(_DTYPES[dtype])
    device = next(model.parameters()).device
    ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
    targets = batch["labels"][:, 1:].to(device)
    c0 = time.process_time()
    with _measuring(model):
        # all parameters for a base-weight set (functional_call substitutes the chosen subset)
        every, f = dg.functionalize(
            model, input_ids=ids, attention_mask=mask, trainable_only=params == "lora"
        )
        theta = {k: every[k] for k in select_params(model, params)}
        del every

        def logits_fn(p):
            return f(p)[:, :-1]  # position t predicts token t + 1

        loss_fn = dg.cross_entropy_loss(targets)
        t0 = time.perf_counter()
        tau = dg.tau_fractions(logits_fn, loss_fn, theta, check=check)
        t1 = time.perf_counter()
        lam = float("nan")
        if lanczos_iters:
            lam = dg.lambda_max(
                logits_fn, loss_fn, theta, iters=lanczos_iters, seed=seed, start="gradient"
            )
        t2 = time.perf_counter()
    out = tau.as_dict()
    out.update(
        lambda_max=lam,
        n_params=float(sum(v.numel() for v in theta.values())),
        seconds_tau=t1 - t0,
        seconds_lambda=t2 - t1,
        cpu_seconds=time.process_time() - c0,
    )
    return {k: float(out[k]) for k in FIELDS}


def check_steps(steps: Sequence[int], total: int) -> tuple[int, ...]:
    """``steps`` sorted, after checking each is an optimizer step in ``[0, total]``.

    Raises:
        ValueError: for no steps, a non-integer, a duplicate, or a step the run never reaches.
    """
    steps = list(steps)
    if not steps:
        raise ValueError("`steps` must name at least one optimizer step; got none.")
    for s in steps:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise ValueError(f"`steps` must be ints; got {s!r} in {steps}.")
    bad = [int(s) for s in steps if not 0 <= s <= total]
    if bad:
        raise ValueError(
            f"`steps` {bad} are not optimizer steps of this run (0 .. {total}); choose steps in "
            "that range or train longer (more examples or epochs)."
        )
    if len(set(steps)) != len(steps):
        raise ValueError(f"`steps` has duplicates: {steps}.")
    return tuple(sorted(int(s) for s in steps))


def _release_memory() -> None:
    """Hand freed heap back to the OS after a measurement (glibc keeps it otherwise).

    One SmolLM2-135M measurement peaks near 10 GB (vocabulary-sized logit tangents); glibc
    keeps the freed pages, and interleaved with training the process grew to 22 GB and was
    OOM-killed on a 23 GB machine. ``malloc_trim`` returns them (a no-op elsewhere).
    """
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class SharpnessRecorder(TrainerCallback):
    """Measure τ fractions and ``λ_max`` on a fixed probe batch at given optimizer steps.

    Step 0 is measured at ``on_train_begin`` (the LoRA initialization, ``B = 0``), step ``s``
    after the ``s``-th optimizer update. Each step's measurements (every parameter set, and the
    probe's logit statistics) go to ``out_dir/step-NNNNNNN.json`` atomically; a step whose file
    exists is skipped, and a Trainer checkpoint is requested at each step, so a killed run
    resumes at the last measured step. The callback only reads the model and sets ``control``.

    Args:
        batch: the probe batch (:func:`probe_batch`).
        steps: optimizer steps (:func:`check_steps` against the run's length is the caller's).
        out_dir: folder of the per-step files.
        param_sets: parameter sets (see :func:`select_params`), e.g. ``("lora", "last_mlp")``.
        lanczos_iters: as in :func:`measure_sharpness`.
        dtype: as in :func:`measure_sharpness`.
        check: as in :func:`measure_sharpness`.
        seed: as in :func:`measure_sharpness`.
        save_checkpoints: request a checkpoint at each measured step.
        progress: print one line per measurement.
    """

    def __init__(
        self,
        batch: dict[str, torch.Tensor],
        steps: Sequence[int],
        out_dir: str | os.PathLike,
        *,
        param_sets: Sequence[str] = ("lora",),
        lanczos_iters: int = 8,
        dtype: str | None = None,
        check: bool = True,
        seed: int = 0,
        save_checkpoints: bool = True,
        progress: bool = False,
    ):
        self.batch = batch
        self.steps = check_steps(steps, 2**62)  # against the run's length: the caller's
        if not param_sets or len(set(param_sets)) != len(param_sets):
            raise ValueError(f"`param_sets` must be distinct names; got {list(param_sets)}.")
        self.param_sets = tuple(param_sets)
        self.out_dir = Path(out_dir)
        self.kw = dict(lanczos_iters=lanczos_iters, dtype=dtype, check=check, seed=seed)
        self.save_checkpoints = save_checkpoints
        self.progress = progress

    def path(self, step: int) -> Path:
        """The file of ``step``."""
        return self.out_dir / f"step-{step:07d}.json"

    def record(self, model, step: int) -> dict:
        """Measure ``model`` now and save it as ``step`` (skipped when already saved)."""
        from sims.optim.diagnostics import logit_statistics
        from sims.runtime.io import write_json

        if self.path(step).exists():
            return self.load(step)
        rows = {}
        for which in self.param_sets:
            rows[which] = measure_sharpness(model, self.batch, params=which, **self.kw)
            _release_memory()
            if self.progress:
                r = rows[which]
                print(f"step {step} [{which}] τ_logit {r['tau_logit']:.4f} τ_func "
                      f"{r['tau_func']:.4f} τ_cross {r['tau_cross']:.4f} λ_max "
                      f"{r['lambda_max']:.4g} loss {r['loss']:.4f} "
                      f"({r['seconds_tau'] + r['seconds_lambda']:.0f} s, load "
                      f"{os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
        device = next(model.parameters()).device
        with _measuring(model), torch.no_grad():
            b = {k: v.to(device) for k, v in self.batch.items()}
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            stats = logit_statistics(logits[:, :-1], b["labels"][:, 1:])
        payload = {"step": step, "measurements": rows,
                   "logits": {k: stats[k] for k in LOGIT_FIELDS},
                   "loadavg": list(os.getloadavg())}  # fmt: skip
        write_json(self.path(step), payload)
        return payload

    def load(self, step: int) -> dict:
        """The saved measurements of ``step`` (JSON stores NaN as text: made floats again)."""
        from sims.runtime.io import read_json

        payload = read_json(self.path(step))
        for rows in payload["measurements"].values():
            for k in rows:
                rows[k] = float(rows[k])
        payload["logits"] = {k: float(v) for k, v in payload["logits"].items()}
        return payload

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Measure step 0 (before any update) when it is requested."""
        if state.global_step == 0 and 0 in self.steps:
            self.record(model, 0)
        return control

    def on_step_end(self, args, state, control, model=None, **kwargs):
        """Measure at a requested step and ask for a checkpoint there."""
        if state.global_step in self.steps:
            self.record(model, state.global_step)
            if self.save_checkpoints:
                control.should_save = True
        return control

    def missing(self) -> list[int]:
        """Requested steps without a saved measurement."""
        return [s for s in self.steps if not self.path(s).exists()]

    def to_dataset(self, attrs: dict | None = None):
        """The saved measurements as an ``xr.Dataset`` over ``(param_set, step)``.

        Raises:
            RuntimeError: when a requested step has no saved measurement.
        """
        import xarray as xr

        if self.missing():
            raise RuntimeError(
                f"no sharpness measurement saved for steps {self.missing()} in {self.out_dir}; "
                "the run stopped before them (or an older finished run is there: recompute)."
            )
        recs = [self.load(s) for s in self.steps]
        data = {
            k: (("param_set", "step"),
                np.array([[r["measurements"][p][k] for r in recs] for p in self.param_sets]))
            for k in FIELDS
        }  # fmt: skip
        for k in LOGIT_FIELDS:
            data[f"logit_{k}"] = ("step", np.array([r["logits"][k] for r in recs]))
        data["loadavg"] = ("step", np.array([r["loadavg"][0] for r in recs]))
        coords = {"param_set": list(self.param_sets), "step": list(self.steps)}
        return xr.Dataset(data, coords=coords, attrs=dict(attrs or {}))


def sharpness_along_finetune(
    train: Sequence,
    probe: Sequence,
    cfg,
    out_dir: str | os.PathLike,
    *,
    steps: Sequence[int],
    max_length: int = 128,
    param_sets: Sequence[str] = ("lora",),
    lanczos_iters: int = 8,
    dtype: str | None = None,
    check: bool = True,
    progress: bool = False,
    model=None,
    tokenizer=None,
):
    """τ fractions and ``λ_max`` on ``probe`` along the LoRA fine-tune of ``cfg`` on ``train``.

    Runs :func:`llm_validation.train.finetune.finetune` (``out_dir/run``; resumable) with a
    :class:`SharpnessRecorder` (``out_dir/measurements``); validates everything before loading
    the model.

    Args:
        train: training examples (:class:`~llm_validation.data.records.Example`).
        probe: the probe examples (held out from ``train``).
        cfg: a :class:`~llm_validation.config.FinetuneConfig` with ``lora=True``.
        out_dir: the study folder.
        steps: optimizer steps to measure at (0 = the LoRA initialization).
        max_length: tokens per sequence, for training and probe alike.
        param_sets: see :func:`select_params` (``"lora"``: the trainable adapters).
        lanczos_iters: Lanczos iterations per ``λ_max`` (:func:`measure_sharpness`).
        dtype: measurement precision (:func:`measure_sharpness`).
        check: report the independent-HVP residual of each τ split.
        progress: progress bars and one line per measurement.
        model: an already loaded model (default: load ``cfg.model`` in float32).
        tokenizer: its tokenizer (required with ``model``).

    Returns:
        An ``xr.Dataset`` over ``(param_set, step)`` (see :meth:`SharpnessRecorder.to_dataset`).

    Raises:
        ValueError: for ``cfg.lora`` false, steps outside the run, an empty probe, an unknown
            parameter set (checked on the loaded model, before training).
    """
    from llm_validation.models.registry import load_model
    from llm_validation.train.finetune import finetune, plan_finetune

    if not getattr(cfg, "lora", False):
        raise ValueError(
            "`cfg.lora` is False: this study measures with respect to the LoRA adapters; set "
            "lora=True (or call measure_sharpness on a model of your own)."
        )
    if len(train) == 0:
        raise ValueError("`train` must hold at least one example; got none.")
    total = plan_finetune(len(train), cfg)["total_steps"]
    steps = check_steps(steps, total)
    if len(probe) == 0:
        raise ValueError("`probe` must hold at least one example; got none.")
    if model is None:
        model, tokenizer = load_model(cfg.model, dtype="float32")
    elif tokenizer is None:
        raise ValueError("`tokenizer` is required with `model`.")
    for which in param_sets:
        if which != "lora":
            select_params(model, which)  # base-weight sets: checked before training
    batch = probe_batch(probe, tokenizer, max_length=max_length)
    out = Path(out_dir)
    rec = SharpnessRecorder(
        batch, steps, out / "measurements", param_sets=param_sets, lanczos_iters=lanczos_iters,
        dtype=dtype, check=check, progress=progress,
    )  # fmt: skip
    t0 = time.perf_counter()
    res = finetune(train, None, cfg, out / "run", max_length=max_length, callbacks=[rec],
                   progress=progress, model=model, tokenizer=tokenizer)  # fmt: skip
    n_tokens = int(batch["attention_mask"].sum())
    attrs = {
        "model": str(cfg.model),
        "lora_rank": cfg.lora_rank,
        "lora_alpha": cfg.lora_alpha,
        "lora_targets": cfg.lora_targets if isinstance(cfg.lora_targets, str)
        else ",".join(cfg.lora_targets),
        "optimizer": cfg.optimizer,
        "lr": cfg.lr,
        "batch_size": cfg.batch_size,
        "train_steps": res.steps,
        "n_train": len(train),
        "n_probe": len(probe),
        "probe_tokens": n_tokens,
        "probe_response_tokens": int((batch["labels"] != -100).sum()),
        "max_length": max_length,
        "lanczos_iters": lanczos_iters,
        "dtype": dtype or str(next(model.parameters()).dtype).removeprefix("torch."),
        "seconds_total": time.perf_counter() - t0,
    }  # fmt: skip
    return rec.to_dataset(attrs)
