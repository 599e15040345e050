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

**Several processes** (``accelerate launch``, ``torchrun``; DDP): the optimizer's
``sync_perturbation`` decides (``build_optimizer(..., sync_perturbation=False)``, or
``optimizer_kwargs`` of the pipeline's config). ``True`` (default): pass 1 is all-reduced as the
Trainer does it (on the last micro-batch), so ``n`` processes give the update of one process on
the whole batch. ``False``: pass 1 runs under ``no_sync`` and each replica perturbs with its own
gradient (the SAM paper's m-sharpness construction). Pass 2 always all-reduces, once per step.

**Mixed precision.** ``bf16=True``: accelerate returns ``outputs.logits`` as a float32 copy made
after the loss, which the loss does not depend on; the logit gradient is therefore taken at the
output layer's own output (``get_output_embeddings()``), the logits the loss was computed from.
``fp16=True``: the Trainer's gradient scaler scales every pass; pass 1 is unscaled by the
Trainer before the optimizer step, the later passes by the optimizer, and an overflow in any
pass skips the step and backs the scale off (the Trainer still steps its LR schedule on such a
step, since accelerate sees the optimizer called).

Not supported (a clear error): DeepSpeed and FSDP (they shard parameters and gradients, which
the perturbation needs whole), tensor and context parallelism, and ``torch.nn.DataParallel``
(several GPUs in one process; launch one process per GPU instead).

Example::

    opt = build_optimizer("pfsam", model, lr=2e-4, rho=0.05)
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=ds, optimizers=(opt, None))
    trainer.train()
"""

from __future__ import annotations

import collections
import contextlib
import functools
from typing import Any

from sims.runtime.extras import require

require("llm", "torch", "transformers", "accelerate", what="sims.optim.hf")

import torch  # noqa: E402
import transformers  # noqa: E402

from .muon import _get  # noqa: E402
from .torch_sam import SAMFamily, _rng_state  # noqa: E402

__all__ = ["SAMFamilyTrainer", "warn_if_fp16_unavailable"]


def warn_if_fp16_unavailable(trainer: transformers.Trainer) -> bool:
    """Warn when ``fp16=True`` was asked for where accelerate has no fp16 mixed precision.

    accelerate has fp16 autocast and loss scaling only on CUDA (and a few other accelerators);
    on the CPU it accepts ``fp16=True``, sets ``mixed_precision="fp16"`` and then trains in
    float32 without a gradient scaler, silently. Returns whether it warned.
    """
    acc = getattr(trainer, "accelerator", None)
    if not trainer.args.fp16 or acc is None or getattr(acc, "native_amp", True):
        return False
    import warnings

    warnings.warn(
        f"fp16=True was asked for, but on this device ({acc.device}) accelerate has no fp16 "
        "mixed precision: the Trainer trains in float32 without loss scaling. Pass bf16=True "
        "for mixed precision on the CPU, or fp16=False to say what runs.",
        UserWarning,
        stacklevel=3,
    )
    return True


def _unwrap(optimizer: Any) -> Any:
    """The optimizer under accelerate's ``AcceleratedOptimizer`` wrapper (if any)."""
    while hasattr(optimizer, "optimizer") and not isinstance(optimizer, SAMFamily):
        optimizer = optimizer.optimizer
    return optimizer


def _feeds(loss: torch.Tensor, tensor: torch.Tensor, limit: int = 200_000) -> bool:
    """Whether ``loss`` was computed from ``tensor`` (breadth-first walk of its autograd graph).

    A tensor is an output ``(grad_fn, output_nr)`` of an autograd node and an edge of the graph
    ``(node, input_nr)`` leads to one output: sibling outputs of one node (DDP's ``_DDPSink``
    returns the loss and the logits from one node) do not feed each other.
    """
    target = (tensor.grad_fn, tensor.output_nr)
    if target[0] is None or loss.grad_fn is None:
        return False
    if loss.grad_fn is target[0] and loss.output_nr == target[1]:
        return True
    queue, seen = collections.deque([loss.grad_fn]), set()
    while queue and len(seen) < limit:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for nxt, nr in node.next_functions:
            if nxt is target[0] and nr == target[1]:
                return True
            if nxt is not None:
                queue.append(nxt)
    return False


class SAMFamilyTrainer(transformers.Trainer):
    """A ``transformers.Trainer`` whose ``training_step`` runs the SAM family's first pass.

    See the module docstring for the design; every other behaviour is the Trainer's own
    (``fp16=True`` where accelerate has no fp16 mixed precision, e.g. the CPU, warns: see
    :func:`warn_if_fp16_unavailable`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        warn_if_fp16_unavailable(self)

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
        ddp = self._check_sam_supported(model)
        if ddp is not None and opt._ddp is not ddp:
            opt.attach_ddp(ddp)
        if self.args.fp16 and opt.grad_scaler is not self.accelerator.scaler:
            opt.grad_scaler = self.accelerator.scaler
        if getattr(self, "_sam_window", None) != self.state.global_step:
            opt._pending.clear()  # a window whose step the fp16 scaler skipped
            self._sam_window = self.state.global_step
        model.train()
        if hasattr(self.optimizer, "train") and callable(self.optimizer.train):
            self.optimizer.train()
        inputs = self._prepare_inputs(inputs)
        rng = _rng_state()
        local = ddp is not None and not opt.sync_perturbation
        with self.accelerator.no_sync(model) if local else contextlib.nullcontext():
            loss, logits = self._sam_loss(model, inputs, num_items_in_batch, opt.needs_logits)
            closure = functools.partial(
                self._sam_loss, model, inputs, num_items_in_batch, opt.needs_logits
            )
            opt.first_pass(
                loss, logits, closure=closure, rng_state=rng, backward=self.accelerator.backward
            )
        return loss.detach()

    def _sam_loss(self, model, inputs, num_items_in_batch, needs_logits=True):
        """``(loss, logits)`` of one micro-batch, scaled as ``Trainer.training_step`` scales it.

        The logits are those the loss was computed from: the model's returned logits, or under
        bf16/fp16 autocast (where accelerate returns a float32 copy made after the loss) the
        output layer's own output.
        """
        head = _get(self.accelerator.unwrap_model(model), "get_output_embeddings")
        seen: list[torch.Tensor] = []
        hook = None
        if needs_logits and isinstance(head, torch.nn.Module):
            hook = head.register_forward_hook(lambda module, args, out: seen.append(out))
        try:
            with self.compute_loss_context_manager():
                loss, outputs = self.compute_loss(
                    model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
                )
        finally:
            if hook is not None:
                hook.remove()
        scaled = self.loss_is_scaled_for_ga
        if scaled is None:
            scaled = (
                self.model_accepts_loss_kwargs and num_items_in_batch is not None
            ) or self.compute_loss_func is not None
        if not scaled:
            loss = loss / self.current_gradient_accumulation_steps
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[1]
        if needs_logits:
            found = next((t for t in (logits, *reversed(seen))
                          if isinstance(t, torch.Tensor) and _feeds(loss, t)), None)  # fmt: skip
            if found is None:
                raise ValueError(
                    "the loss does not depend on the model's returned logits nor on the output "
                    "layer's output (get_output_embeddings()); Functional/Logit/ANGLE-SAM need "
                    "the logits the loss is computed from: give the model "
                    "get_output_embeddings() (DDP with find_unused_parameters and bf16 return "
                    "copies of the logits), compute the loss from outputs.logits in "
                    "compute_loss, or use variant 'sam'."
                )
            logits = found
        return loss, logits

    def _check_sam_supported(self, model) -> torch.nn.Module | None:
        """Refuse what the SAM family cannot run; return the DDP wrapper in a multi-process run."""
        args = self.args
        problems = []
        if self.is_deepspeed_enabled:
            problems.append("DeepSpeed (sharded parameters)")
        if self.is_fsdp_enabled:
            problems.append("FSDP (sharded parameters)")
        if getattr(self, "is_cp_enabled", False):
            problems.append("context parallelism")
        tp = getattr(self, "get_tp_size", lambda: 1)()
        if tp > 1:
            problems.append(f"tensor parallelism (tp_size={tp})")
        if args.n_gpu > 1:
            problems.append(
                f"torch.nn.DataParallel over {args.n_gpu} GPUs in one process (launch one "
                "process per GPU with accelerate launch or torchrun)"
            )
        ddp = None
        if args.world_size > 1:
            if isinstance(model, torch.nn.parallel.DistributedDataParallel):
                ddp = model
            else:
                problems.append(
                    f"a {args.world_size}-process run whose model is not "
                    f"DistributedDataParallel-wrapped (got {type(model).__name__})"
                )
        if problems:
            raise ValueError(
                "SAMFamilyTrainer with a SAM-family optimizer does not support "
                + ", ".join(problems)
                + "; use plain data parallelism (accelerate launch / torchrun), or a plain "
                "optimizer."
            )
        return ddp
