"""Per-example losses, the trajectory callback, the proxy stage and its resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import TrainerCallback

from llm_validation.config import ProxyConfig
from llm_validation.data.records import IGNORE_INDEX, Example, tokenize_examples
from llm_validation.models.registry import load_model
from llm_validation.train.proxy import plan_proxy, record_trajectories
from llm_validation.train.trainer import (
    LossRecorder,
    TokenDataset,
    _length_batches,
    accumulation_steps,
    build_trainer,
    per_example_losses,
    training_arguments,
)


@pytest.fixture(scope="module")
def examples(records):
    return [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(records)]


def _reference_loss(model, rec) -> float:
    """Independent computation: one example, no padding, explicit log-softmax and mask."""
    ids = torch.tensor([rec["input_ids"]])
    labels = torch.tensor(rec["labels"])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
    total, count = 0.0, 0
    for t in range(1, ids.shape[1]):
        if labels[t] != IGNORE_INDEX:
            total -= float(logp[t - 1, labels[t]])
            count += 1
    return total / count if count else math.nan


def test_per_example_losses_match_unbatched_reference(tiny_model_dir, examples):
    model, tok = load_model(tiny_model_dir, device="cpu")
    recs = tokenize_examples(examples[:20], tok, max_length=64)
    recs[3] = {**recs[3], "labels": [IGNORE_INDEX] * len(recs[3]["labels"])}  # no labels
    got = per_example_losses(model, recs, pad_id=tok.pad_token_id, batch_tokens=200)
    want = np.array([_reference_loss(model, r) for r in recs])
    assert np.isnan(got[3]) and np.isnan(want[3])
    # float32 forward vs float64 log-softmax: agreement to ~1e-6 relative
    np.testing.assert_allclose(np.delete(got, 3), np.delete(want, 3), rtol=1e-5)
    assert not model.training  # load_model returns an eval-mode model; the mode is restored
    model.train()
    per_example_losses(model, recs[:2], pad_id=tok.pad_token_id)
    assert model.training


def test_length_batches_cover_each_example_once():
    lengths = np.random.default_rng(0).integers(5, 300, size=97)
    batches = _length_batches(lengths, batch_tokens=1000, max_batch=16)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(97))
    for b in batches:
        assert len(b) <= 16 and (len(b) == 1 or len(b) * lengths[b].max() <= 1000)
    assert lengths[batches[0]].max() == lengths.max()  # longest first (fails fast on OOM)


def test_accumulation_steps():
    assert accumulation_steps(128, 4, 1) == 32
    assert accumulation_steps(128, 4, 2) == 16
    with pytest.raises(ValueError, match=r"`batch_size`=128 must be a multiple of .* 3 x 2 = 6"):
        accumulation_steps(128, 3, 2)


def _train(model_dir, examples, *, callbacks=(), lora_dropout=0.1, out, steps=6):
    from llm_validation.models.lora import apply_lora

    model, tok = load_model(model_dir, device="cpu")
    model = apply_lora(model, rank=4, alpha=8, dropout=lora_dropout, targets="attention", seed=0)
    recs = tokenize_examples(examples, tok, max_length=64)
    args = training_arguments(out, per_device_batch_size=4, batch_size=8, epochs=1, lr=1e-2,
                              warmup_ratio=0.0, seed=0, save_strategy="no", progress=False,
                              max_steps=steps)  # fmt: skip
    tr = build_trainer(model, tok, TokenDataset(recs), args, callbacks=callbacks)
    tr.train()
    return model, recs, tok


def test_loss_recorder_does_not_change_training(tiny_model_dir, examples, tmp_path):
    """Recording (eval-mode forward passes) leaves the training run bit-identical.

    LoRA dropout 0.1 makes the run depend on the RNG and on train/eval mode: a recorder that
    consumed random numbers or left the model in eval mode would change the weights.
    """
    plain, _, _ = _train(tiny_model_dir, examples[:48], out=tmp_path / "a")
    rec = LossRecorder(
        tokenize_examples(examples[:48], load_model(tiny_model_dir)[1], max_length=64),
        [2, 4], tmp_path / "losses", pad_id=1, save_checkpoints=False, progress=False,
    )  # fmt: skip
    recorded, _, _ = _train(tiny_model_dir, examples[:48], callbacks=[rec],
                            out=tmp_path / "b")  # fmt: skip
    for (n, a), (_, b) in zip(plain.named_parameters(), recorded.named_parameters(), strict=True):
        assert torch.equal(a, b), n
    traj = rec.trajectories()
    assert traj.shape == (48, 2) and np.isfinite(traj).all()
    assert traj[:, 1].mean() < traj[:, 0].mean()  # lr 1e-2 on LoRA: the loss drops


@pytest.mark.parametrize(("scheduler", "warmup"), [("cosine", 0.25), ("linear", 0.5)])
def test_learning_rate_schedule(tiny_model_dir, examples, tmp_path, scheduler, warmup):
    """training_arguments' schedule: linear warm-up over ceil(ratio x T) steps, then the decay."""
    model, tok = load_model(tiny_model_dir, device="cpu")
    total, lr = 8, 1e-3
    args = training_arguments(tmp_path, per_device_batch_size=4, batch_size=8, epochs=1, lr=lr,
                              warmup_ratio=warmup, scheduler=scheduler, seed=0,
                              save_strategy="no", progress=False)  # fmt: skip
    recs = tokenize_examples(examples[:8], tok, max_length=64)
    tr = build_trainer(model, tok, TokenDataset(recs), args)
    tr.create_optimizer_and_scheduler(num_training_steps=total)
    got = []
    for _ in range(total):
        got.append(tr.lr_scheduler.get_last_lr()[0])
        tr.optimizer.step()
        tr.lr_scheduler.step()
    w = math.ceil(warmup * total)
    decay = {"cosine": lambda x: 0.5 * (1 + math.cos(math.pi * x)), "linear": lambda x: 1 - x}
    want = [lr * (t / w if t < w else decay[scheduler]((t - w) / (total - w)))
            for t in range(total)]  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)


def test_plan_proxy_steps():
    cfg = ProxyConfig(batch_size=128, epoch_fraction=1 / 3, n_checkpoints=5)
    p = plan_proxy(20_000, cfg)
    assert p.steps_per_epoch == 157 and p.stop_step == 52
    assert p.record_steps == (10, 21, 31, 42, 52)
    assert p.scheduled_steps == 3 * 157
    with pytest.raises(ValueError, match="fewer than `n_checkpoints`=5"):
        plan_proxy(100, ProxyConfig(batch_size=64, n_checkpoints=5))


class _Kill(TrainerCallback):
    """Simulate a crash after the Trainer wrote the checkpoint of step ``at``."""

    def __init__(self, at):
        self.at = at

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt


def test_proxy_trajectories_resume_after_kill(tiny_model_dir, examples, tmp_path, capsys):
    """Checkpoints at the recording steps (2, 4, 6) and every 3 steps; killed after the save
    of step 3, the proxy resumes there (and says so) and records what the full run records,
    which is the loss of the model at each recording step (independent float64 reference)."""
    import dataclasses

    from transformers import AutoModelForCausalLM

    cfg = ProxyConfig(model=str(tiny_model_dir), epoch_fraction=0.5, schedule_epochs=2.0,
                      n_checkpoints=3, lr=1e-2, batch_size=8, per_device_batch_size=4,
                      seed=3, save_steps=3)  # fmt: skip
    # ceil(90/8) = 12 steps/epoch, a 24-step schedule cut at 6, records at 2, 4, 6
    ex = examples[:90]
    keep = dataclasses.replace(cfg, keep_checkpoints=True)
    full = record_trajectories(ex, keep, tmp_path / "full", max_length=64, progress=False)
    assert full["step"].values.tolist() == [2, 4, 6]
    np.testing.assert_allclose(full["epoch"].values, np.array([2, 4, 6]) / 12)
    assert full.sizes == {"example": 90, "checkpoint": 3}
    assert full["source"].values[1] == "data/CoT/gsm_style.json"
    (ckpt,) = (tmp_path / "full" / "trainer").iterdir()  # only the newest is kept
    assert ckpt.name == "checkpoint-6"
    model = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    tok = load_model(tiny_model_dir)[1]
    recs = tokenize_examples([ex[i] for i in (0, 7, 31, 89)], tok, max_length=64)
    want = [_reference_loss(model, r) for r in recs]
    np.testing.assert_allclose(full["loss"].values[[0, 7, 31, 89], 2], want, rtol=2e-5)
    with pytest.raises(KeyboardInterrupt):
        record_trajectories(ex, cfg, tmp_path / "cut", max_length=64, progress=False,
                            callbacks=[_Kill(3)])  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "cut" / "losses").glob("step-*")) == [
        "step-0000002.nc",
    ]  # fmt: skip
    assert [p.name for p in (tmp_path / "cut" / "trainer").iterdir()] == ["checkpoint-3"]
    capsys.readouterr()
    resumed = record_trajectories(ex, cfg, tmp_path / "cut", max_length=64, progress=False)
    assert "proxy: resumed from " in capsys.readouterr().out
    np.testing.assert_allclose(resumed["loss"].values, full["loss"].values, rtol=1e-6)
    assert not (tmp_path / "cut" / "trainer").exists()  # checkpoints pruned after success
    # the proxy learns: mean loss falls from checkpoint 1 to 3
    assert full["loss"].values[:, 2].mean() < full["loss"].values[:, 0].mean() - 0.1


def _fake_checkpoint(folder, step, *, epoch, max_steps=12):
    """A checkpoint folder with the files the resume check reads (no training)."""
    import json

    from safetensors.torch import save_file

    ckpt = folder / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    save_file({"w": torch.arange(6.0).reshape(2, 3)}, str(ckpt / "adapter_model.safetensors"))
    torch.save({"state": {}}, ckpt / "optimizer.pt")
    (ckpt / "trainer_state.json").write_text(
        json.dumps({"global_step": step, "epoch": epoch, "max_steps": max_steps})
    )
    return ckpt


def test_resume_point_is_the_newest_intact_checkpoint(tmp_path):
    from llm_validation.train.trainer import (
        CheckpointKeeper,
        describe_resume,
        epoch_checkpoints,
        find_resume_checkpoint,
    )

    for step in (3, 4, 6, 8, 9):
        _fake_checkpoint(tmp_path, step, epoch=step / 4)
    assert [p.name for p in epoch_checkpoints(tmp_path)] == ["checkpoint-4", "checkpoint-8"]
    CheckpointKeeper(keep_epochs=1).prune(tmp_path)  # the last epoch one and the newest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-8", "checkpoint-9"]
    said = []
    state = tmp_path / "checkpoint-9" / "trainer_state.json"
    state.write_text(state.read_text()[:-5])  # a save cut off by a kill
    assert find_resume_checkpoint(tmp_path, say=said.append).name == "checkpoint-8"
    assert "checkpoint-9 is corrupt: trainer_state.json is unreadable" in said[0]
    assert (tmp_path / "corrupt-checkpoint-9").is_dir()
    w = tmp_path / "checkpoint-8" / "adapter_model.safetensors"
    w.write_bytes(w.read_bytes()[:-4])  # a weight file damaged on disk
    assert find_resume_checkpoint(tmp_path, say=said.append) is None
    assert "adapter_model.safetensors is damaged" in said[1]
    ckpt = _fake_checkpoint(tmp_path, 10, epoch=2.5)
    # 10 steps at 4 per epoch: 2 epochs done, 2 steps (16 of 30 examples at batch 8) into the 3rd
    assert describe_resume(ckpt, steps_per_epoch=4, batch_size=8, n_examples=30) == (
        "step 10/12, epoch 3 at position 16/30 (step 2/4 of the epoch)"
    )
