"""A small decoder LM trained from scratch on offline corpora (extra ``torch``).

Used for the SAM-family experiments (seed 003 analogs) and by other studies that need a
pre-training run on CPU (schedules, weight decay, Muon vs AdamW, spectral recorders).

Model (:mod:`sims.lm.model`): :class:`GPTConfig` and :class:`GPT`, nanoGPT / modded-nanogpt
style: RMSNorm, RoPE, explicit causal attention (forward-mode AD works, so the Hessian
diagnostics of :mod:`sims.optim.diagnostics` apply), ReLU² MLP, tied embeddings, no biases;
``get_input_embeddings``/``get_output_embeddings`` as in Hugging Face, so
:func:`sims.optim.partition_params` splits it into Muon/AdamW groups.

Data (:mod:`sims.lm.data`): :class:`CorpusConfig` / :func:`make_corpus`: synthetic HMM
(default) or Zipf-Markov token streams with an exact Bayes loss, or a local text file with byte
or character tokens; :func:`batch_indices` gives a per-seed data order that is a pure function of
``(seed, step)``.

Schedules (:mod:`sims.lm.schedules`): :func:`lr_factor` for ``constant``, ``cosine``, ``step``
(decay by ``step_factor`` at ``step_fractions`` of the run) and ``wsd`` (warm-up–stable–decay),
each with an optional linear warm-up.

Training (:mod:`sims.lm.train`): :class:`LMTrainConfig` (frozen, validated; ``to_dict``,
``from_dict``, ``replace``) and the one loop::

    run = train_lm(config, callback=fn, callback_every=10, checkpoint="run.pt", progress=True)
    run.history      # xr.Dataset: train_loss/lr over step, val_loss over eval_step, ...
    run.model, run.optimizer, run.status, run.message, run.success

* optimizer by name through :func:`sims.optim.build_optimizer` (``adamw``, ``sgd``, ``muon``,
  ``sam``, ``fsam``, ``lsam``, ``angle_sam``, ``psam``, ``pfsam``), with ``lr``,
  ``weight_decay`` (matrices only), ``betas``, ``rho`` and ``optimizer_options``;
* ``schedule`` + ``warmup_steps`` (+ ``step_fractions``/``step_factor``, ``decay_fraction``,
  ``min_lr_factor``); ``grad_accum`` micro-batches per step;
* validation every ``eval_every`` steps (and at step 0 and the end) on the corpus' validation
  set; ``history.attrs["bayes_loss"]`` is the synthetic corpora's loss floor;
* ``callback(ctx)`` every ``callback_every`` steps with a :class:`CallbackContext` (``model``,
  ``step``, ``batch`` = ``(inputs, targets)``, ``optimizer``, ``config``, ``corpus``); a returned
  ``{name: float}`` is recorded over ``callback_step`` (e.g. τ fractions, spectral norms);
* ``checkpoint``: resume from the file when it exists (same config only; the resumed run is
  bit-identical to an uninterrupted one), written every ``checkpoint_every`` steps, at the end
  and on Ctrl-C (the run then returns with status ``"cancelled"`` and says how to resume);
* ``device`` (default ``"cpu"``; ``"cuda"`` on a GPU): model, optimizer state, batches, validation
  and the callbacks' model live there; the initial weights are drawn on the CPU, so they do not
  depend on the device (CUDA is untested in CI: no GPU there);
* non-finite gradients: ``nonfinite="raise"`` stops with a clear error (nothing updated) or
  ``"skip"`` skips the step (``history.attrs["skipped_steps"]``);
* every result carries ``attrs["config"]`` and ``attrs["meta"]`` (provenance: seed, package
  versions, git commit); write it with :func:`sims.runtime.io.write_netcdf`.

CPU cost of the default config (0.1M parameters, batch 16 × 64 tokens, V = 256, one thread):
0.1 s per AdamW step and 0.23 s per FSAM step measured on a 2-core machine under heavy load
(load average ~7); 300 AdamW steps take a minute or less.

Examples:
    >>> cfg = LMTrainConfig(steps=3, eval_every=0, corpus=CorpusConfig(n_train=64, n_val=16))
    >>> run = train_lm(cfg)
    >>> run.success, run.history.eval_step.values.tolist()
    (True, [0, 3])
"""

from sims.runtime.extras import require

require("torch", "torch", what="sims.lm")

from .data import Corpus, CorpusConfig, batch_indices, make_corpus  # noqa: E402
from .model import GPT, GPTConfig  # noqa: E402
from .schedules import SCHEDULES, lr_factor  # noqa: E402
from .train import (  # noqa: E402
    CallbackContext,
    LMRun,
    LMTrainConfig,
    evaluate_lm,
    lm_loss,
    train_lm,
)

__all__ = [
    "GPTConfig", "GPT", "CorpusConfig", "Corpus", "make_corpus", "batch_indices", "SCHEDULES",
    "lr_factor", "LMTrainConfig", "CallbackContext", "LMRun", "train_lm", "evaluate_lm",
    "lm_loss",
]  # fmt: skip
