"""One rank of the 2-process SAM-family checks of ``test_optim_distributed.py`` (gloo, CPU).

Run by that test as ``python -m tests.sims.optim.distributed_worker OUT_DIR`` in two processes
with ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` set. Every case trains from the same
start on this rank's shard of a fixed batch and saves the final parameters (and the number of
all-reduces per step) to ``OUT_DIR/rank{r}.pt``; the test compares them with one process on the
whole batch and with an independent per-replica construction. Nothing is asserted here.
"""

from __future__ import annotations

import os
import sys
import traceback

import torch
import torch.distributed as dist

from sims.optim import SAM, SAMFamily
from tests.sims.optim.optim_helpers import closure_for, make_data, make_net

N, K_MICRO = 16, 2  # whole batch; micro-batches per replica in the accumulation cases
STEPS = 2
RAW_CASES = {  # name -> (SAMFamily options, micro-batches per replica)
    "sam": (dict(variant="sam"), 1),
    "fsam": (dict(variant="fsam"), 1),
    "lsam": (dict(variant="lsam"), 1),
    "angle_sam": (dict(variant="angle_sam", angle_weights=(0.3, 0.8)), 1),
    "asam": (dict(variant="sam", adaptive=True), 1),
    "pfsam": (dict(variant="fsam", precondition=True, betas=(0.8, 0.95)), 1),
    "fsam_k2": (dict(variant="fsam"), K_MICRO),
    "angle_sam_k2": (dict(variant="angle_sam", angle_weights=(0.3, 0.8)), K_MICRO),
}
RHO, LR, LR_ADAM = 0.3, 0.1, 0.01


def shard(rank: int, world: int):
    x, y = make_data(n=N, seed=1)
    n = N // world
    return x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n]


def _counting_ddp(net):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    ddp = torch.nn.parallel.DistributedDataParallel(net)
    calls = []

    def hook(state, bucket):
        calls.append(1)
        return allreduce_hook(state, bucket)

    ddp.register_comm_hook(None, hook)
    return ddp, calls


def raw_case(name: str, sync: bool, rank: int, world: int, attach: bool = True) -> dict:
    kw, k = RAW_CASES[name]
    kw = dict(kw)
    net = make_net()
    ddp, calls = _counting_ddp(net)
    adam = kw.get("precondition", False)
    base = torch.optim.Adam if adam else torch.optim.SGD
    opt = SAMFamily(ddp.parameters(), base, RHO, lr=LR_ADAM if adam else LR,
                    sync_perturbation=sync, **kw)  # fmt: skip
    if attach:
        opt.attach_ddp(ddp)
    x, y = shard(rank, world)
    m = len(x) // k
    closures = [closure_for(ddp, x[i * m : (i + 1) * m], y[i * m : (i + 1) * m], scale=1.0 / k)
                for i in range(k)]  # fmt: skip
    per_step = []
    for _ in range(STEPS):
        before = len(calls)
        opt.step(closures if k > 1 else closures[0])
        per_step.append(len(calls) - before)
    return {"params": {n: p.detach().clone() for n, p in net.named_parameters()},
            "allreduces": per_step}  # fmt: skip


def readme_case(loop: str, sync: bool, rank: int, world: int, own_hook: bool = False) -> dict:
    """davda54/sam's README loops (the two halves, or ``step(closure)``) on a DDP model."""
    net = make_net()
    ddp = _counting_ddp(net)[0] if own_hook else torch.nn.parallel.DistributedDataParallel(net)
    opt = SAM(ddp.parameters(), torch.optim.SGD, RHO, lr=LR, sync_perturbation=sync)
    opt.attach_ddp(ddp)
    x, y = shard(rank, world)
    ce = torch.nn.functional.cross_entropy
    for _ in range(STEPS):
        if loop == "two_step":
            ce(ddp(x), y).backward()
            opt.first_step(zero_grad=True)
            ce(ddp(x), y).backward()
            opt.second_step(zero_grad=True)
        else:

            def closure():
                loss = ce(ddp(x), y)
                loss.backward()
                return loss

            ce(ddp(x), y).backward()
            opt.step(closure)
            opt.zero_grad()
    return {"params": {n: p.detach().clone() for n, p in net.named_parameters()}}


class _Classifier(torch.nn.Module):
    """``TinyNet`` with a Hugging Face-style forward: ``{"loss", "logits"}``."""

    def __init__(self):
        super().__init__()
        self.net = make_net()

    def get_output_embeddings(self):  # as a Hugging Face LM (DDP hands out copies of the logits)
        return self.net.fc2

    def forward(self, x, labels=None):
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
        return out


class _Rows(torch.utils.data.Dataset):
    def __init__(self):
        self.x, self.y = make_data(n=N, seed=1)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def trainer_case(variant: str, sync: bool, out_dir: str, **kw) -> dict:
    """One SAMFamilyTrainer step (2 micro-batches of 4 per rank = the whole batch of 16)."""
    import transformers

    from sims.optim.hf import SAMFamilyTrainer

    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    class Recording(SAMFamilyTrainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            seen.append((inputs["x"].detach().clone(), inputs["labels"].detach().clone()))
            return super().training_step(model, inputs, num_items_in_batch)

    model = _Classifier()
    opt = SAMFamily(model.parameters(), torch.optim.SGD, RHO, variant=variant, lr=LR,
                    sync_perturbation=sync, **kw)  # fmt: skip
    args = transformers.TrainingArguments(
        output_dir=os.path.join(out_dir, f"trainer-{variant}-{sync}"),
        per_device_train_batch_size=N // 4, gradient_accumulation_steps=2, max_steps=1,
        learning_rate=LR, lr_scheduler_type="constant", report_to=[], save_strategy="no",
        logging_strategy="no", use_cpu=True, seed=0, disable_tqdm=True, max_grad_norm=1.0,
        dataloader_num_workers=0, remove_unused_columns=False,
    )  # fmt: skip
    trainer = Recording(model=model, args=args, train_dataset=_Rows(), optimizers=(opt, None))
    trainer.train()
    return {"params": {n: p.detach().clone() for n, p in model.net.named_parameters()},
            "x": torch.cat([x for x, _ in seen]), "y": torch.cat([y for _, y in seen]),
            "micro_batches": len(seen), "sam_steps": opt.sam_steps,
            "ddp": type(trainer.model_wrapped).__name__}  # fmt: skip


def main(out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results: dict = {"world": world}
    try:
        for name in RAW_CASES:
            for sync in (True, False):
                results[("raw", name, sync)] = raw_case(name, sync, rank, world)
        # without attach_ddp: DDP's own hooks sync every backward (= sync_perturbation=True)
        results[("unattached", "lsam", True)] = raw_case("lsam", True, rank, world, attach=False)
        results[("unattached", "fsam_k2", True)] = raw_case("fsam_k2", True, rank, world,
                                                            attach=False)  # fmt: skip
        try:
            raw_case("sam", False, rank, world, attach=False)
        except ValueError as exc:
            results["unattached_false_error"] = str(exc)
        for loop in ("two_step", "closure"):
            for sync in (True, False):
                results[("readme", loop, sync)] = readme_case(loop, sync, rank, world)
            try:  # a DDP model with a comm hook of its own: per-replica pass 1 impossible
                readme_case(loop, False, rank, world, own_hook=True)
            except ValueError as exc:
                results[("readme_own_hook_error", loop)] = str(exc)
        for variant, sync, kw in (("fsam", True, {}), ("fsam", False, {}),
                                  ("angle_sam", False, {"angle_weights": (0.3, 0.8)})):  # fmt: skip
            results[("trainer", variant, sync)] = trainer_case(variant, sync, out_dir, **kw)
    except Exception:  # report, so the test shows the rank's traceback
        results["error"] = traceback.format_exc()
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
