"""Hugging Face ``Trainer`` adapter for the SAM family (extra ``llm``).

:class:`SAMFamilyTrainer` overrides only ``training_step``. With an ordinary optimizer it defers
to ``Trainer.training_step``. With a :class:`~sims.optim.torch_sam.SAMFamily` optimizer (from
``build_optimizer("fsam", model, ...)``, passed as ``optimizers=(opt, None)``):

* each call of ``training_step`` (one micro-batch of the Trainer's accumulation loop) runs pass 1
  at ``θ`` exactly as the Trainer would (``compute_loss``, the same loss scaling for gradient
  accumulation, ``accelerator.backward``), keeps the logit gradient the variant needs, and
  queues the micro-batch for re-evaluation (``SAMFamily.first_pass``);
* when the Trainer then calls ``optimizer.step()`` at the end of the accumulation window, the
  optimizer computes the perturbation from the **accumulated** gradient and re-runs every queued
  micro-batch at ``θ + e`` (pass 2) before the base step at ``θ``.

So ``k`` micro-batches give the same update as one batch ``k`` times larger (tested), and the
Trainer's loop, callbacks, checkpointing and schedulers are untouched. The Trainer's
``max_grad_norm`` clips the pass-1 gradient, which leaves the normalized perturbation unchanged;
to clip the gradient the base optimizer receives, pass ``max_grad_norm`` to ``build_optimizer``.

Not supported (a clear error): fp16 loss scaling (use bf16 or fp32), DeepSpeed, FSDP,
multi-process training and context parallelism.

Example::

    opt = build_optimizer("pfsam", model, lr=2e-4, rho=0.05)
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=ds, optimizers=(opt, None))
    trainer.train()
"""

from __future__ import annotations

import functools
from typing import Any

from sims.extras import require

require("llm", "torch", "transformers", "accelerate", what="sims.optim.hf")

import torch  # noqa: E402
import transformers  # noqa: E402

from .torch_sam import SAMFamily, _rng_state  # noqa: E402

__all__ = ["SAMFamilyTrainer"]


def _unwrap(optimizer: Any) -> Any:
    """The optimizer under accelerate's ``AcceleratedOptimizer`` wrapper (if any)."""
    while hasattr(optimizer, "optimizer") and not isinstance(optimizer, SAMFamily):
        optimizer = optimizer.optimizer
    return optimizer


class SAMFamilyTrainer(transformers.Trainer):
    """A ``transformers.Trainer`` whose ``training_step`` runs the SAM family's first pass.

    See the module docstring for the design; every other behaviour is the Trainer's own.
    """

    def training_step(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        """Pass 1 of a SAM-family step on one micro-batch (or ``Trainer.training_step``)."""
        opt = _unwrap(self.optimizer)
        if not isinstance(opt, SAMFamily):
            return super().training_step(model, inputs, num_items_in_batch)
        self._check_sam_supported()
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()
        inputs = self._prepare_inputs(inputs)
        rng = _rng_state()
        loss, logits = self._sam_loss(model, inputs, num_items_in_batch)
        closure = functools.partial(self._sam_loss, model, inputs, num_items_in_batch)
        opt.first_pass(
            loss, logits, closure=closure, rng_state=rng, backward=self.accelerator.backward
        )
        return loss.detach()

    def _sam_loss(self, model, inputs, num_items_in_batch):
        """``(loss, logits)`` of one micro-batch, scaled as ``Trainer.training_step`` scales it."""
        with self.compute_loss_context_manager():
            loss, outputs = self.compute_loss(
                model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
            )
        scaled = self.loss_is_scaled_for_ga
        if scaled is None:
            scaled = (
                self.model_accepts_loss_kwargs and num_items_in_batch is not None
            ) or self.compute_loss_func is not None
        if not scaled:
            loss = loss / self.current_gradient_accumulation_steps
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[1]
        return loss, logits

    def _check_sam_supported(self) -> None:
        args = self.args
        problems = []
        if args.fp16:
            problems.append("fp16 loss scaling (use bf16=True or fp32)")
        if self.is_deepspeed_enabled:
            problems.append("DeepSpeed")
        if self.is_fsdp_enabled:
            problems.append("FSDP")
        if args.world_size > 1:
            problems.append(f"multi-process training (world_size={args.world_size})")
        if getattr(self, "is_cp_enabled", False):
            problems.append("context parallelism")
        if problems:
            raise ValueError(
                "SAMFamilyTrainer with a SAM-family optimizer does not support "
                + ", ".join(problems)
                + "; train on one process without them, or use a plain optimizer."
            )
