"""LoRA fine-tuning: adapter-only updates, a hand-written reference loop, upsampled sizes,
accumulation, resume after a kill (SIGKILL mid-epoch, damaged checkpoints), no warnings."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from llm_validation.config import FinetuneConfig
from llm_validation.data.records import IGNORE_INDEX, Example, tokenize_examples
from llm_validation.train.finetune import finetune, load_finetuned, plan_finetune

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def examples(records):
    return [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(records)]


def _cfg(model_dir, **kw):
    base = dict(model=str(model_dir), lora_rank=4, lora_alpha=8.0, lora_dropout=0.0,
                lora_targets="attention", epochs=1, lr=1e-2, warmup_ratio=0.0, batch_size=8,
                per_device_batch_size=4, seed=0)  # fmt: skip
    base.update(kw)
    return FinetuneConfig(**base)


def _adapter(path):
    return load_file(str(path / "adapter_model.safetensors"))


def test_lora_finetune_changes_only_adapters(tiny_model_dir, examples, tmp_path):
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    res = finetune(examples[:32], None, _cfg(tiny_model_dir), tmp_path / "ft", max_length=64,
                   progress=False)  # fmt: skip
    assert res.steps == 4 and res.n_train == 32
    ad = _adapter(res.final)
    assert set(k.split(".")[-2] for k in ad) == {"lora_A", "lora_B"}
    assert all(float(v.abs().max()) > 0 for k, v in ad.items() if "lora_B" in k)  # B moved off 0
    merged, _ = load_finetuned(tiny_model_dir, res.final, device="cpu", dtype="float32")
    # merged = base + B A * alpha/r on the adapted projections; everything else untouched
    for (n, p0), (_, p1) in zip(base.named_parameters(), merged.named_parameters(), strict=True):
        adapted = any(t in n for t in ("q_proj", "k_proj", "v_proj", "o_proj"))
        assert torch.equal(p0, p1) != adapted, n


def test_upsampled_training_set_and_steps(tiny_model_dir, examples, tmp_path):
    counts = np.ones(32, np.int64)
    counts[:8] = 2  # 8 examples seen twice: 40 per epoch -> ceil(40 / 8) = 5 steps
    res = finetune(examples[:32], counts, _cfg(tiny_model_dir), tmp_path / "up", max_length=64,
                   progress=False)  # fmt: skip
    assert res.n_train == 40 and res.steps == 5
    p = plan_finetune(40, _cfg(tiny_model_dir, epochs=3, warmup_ratio=0.03))
    assert (p["steps_per_epoch"], p["total_steps"], p["warmup_steps"], p["accumulation"]) == (
        5, 15, 1, 2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="one non-negative count per example"):
        finetune(examples[:32], counts[:5], _cfg(tiny_model_dir), tmp_path / "bad")


def test_accumulation_equals_one_big_batch(tiny_model_dir, examples, tmp_path):
    """4 x 2 accumulated micro-batches give the same update as one batch of 8 (token-mean loss)."""
    a = finetune(examples[:32], None, _cfg(tiny_model_dir, per_device_batch_size=4),
                 tmp_path / "acc", max_length=64, progress=False)  # fmt: skip
    b = finetune(examples[:32], None, _cfg(tiny_model_dir, per_device_batch_size=8),
                 tmp_path / "big", max_length=64, progress=False)  # fmt: skip
    wa, wb = _adapter(a.final), _adapter(b.final)
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-6)


def _token_loss_sum(model, rec):
    """Summed cross-entropy of the response tokens of one unpadded record (with grad)."""
    ids = torch.tensor([rec["input_ids"]])
    labels = torch.tensor(rec["labels"])
    logp = torch.log_softmax(model(input_ids=ids).logits[0], dim=-1)
    keep = labels[1:] != IGNORE_INDEX
    return -logp[:-1][keep].gather(1, labels[1:][keep][:, None]).sum(), int(keep.sum())


def test_finetune_matches_a_hand_written_training_loop(tiny_model_dir, examples, tmp_path):
    """finetune() = AdamW written out by hand on the token-mean loss of the full batch.

    Four full-batch steps (32 examples = 4 accumulated micro-batches of 8), 1 warm-up step then
    cosine decay, decoupled weight decay 0.1, global gradient clipping at 1: the reference
    computes the loss example by example (no padding, no collator, no Trainer), so the loss
    normalization across micro-batches, the schedule, the clipping and the optimizer wiring
    are all checked against an independent implementation.
    """
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model

    lr, wd, steps, warm = 5e-3, 0.1, 4, 1
    cfg = _cfg(tiny_model_dir, batch_size=32, per_device_batch_size=8, epochs=steps, lr=lr,
               weight_decay=wd, warmup_ratio=warm / steps, scheduler="cosine")  # fmt: skip
    res = finetune(examples[:32], None, cfg, tmp_path / "ft", max_length=64, progress=False)
    assert res.steps == steps
    model, tok = load_model(tiny_model_dir, device="cpu", dtype="float32")
    model = apply_lora(model, rank=4, alpha=8.0, dropout=0.0, targets="attention", seed=0)
    model.train()
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    recs = tokenize_examples(examples[:32], tok, max_length=64)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(steps):
        rate = lr * (t / warm if t < warm else 0.5 * (1 + math.cos(math.pi * (t - warm) /
                                                                   (steps - warm))))  # fmt: skip
        model.zero_grad()
        parts = [_token_loss_sum(model, r) for r in recs]
        loss = sum(p[0] for p in parts) / sum(p[1] for p in parts)
        loss.backward()
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params.values()))
        clip = min(1.0, 1.0 / (float(norm) + 1e-6))
        with torch.no_grad():
            for n, p in params.items():
                g = p.grad * clip
                m[n] = b1 * m[n] + (1 - b1) * g
                v[n] = b2 * v[n] + (1 - b2) * g * g
                mhat, vhat = m[n] / (1 - b1 ** (t + 1)), v[n] / (1 - b2 ** (t + 1))
                p.mul_(1 - rate * wd)
                p.sub_(rate * mhat / (vhat.sqrt() + eps))
    got = _adapter(res.final)
    assert len(got) == len(params) == 16
    for n, p in params.items():
        key = n.replace(".default", "")
        torch.testing.assert_close(got[key], p.detach(), rtol=2e-4, atol=2e-6, msg=key)
    assert float(params[next(k for k in params if "lora_B" in k)].detach().abs().max()) > 1e-3


class _KillAt(TrainerCallback):
    """Raise KeyboardInterrupt once the checkpoint of step ``at`` is written."""

    def __init__(self, at):
        self.at = at

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt


class _StepCounter(TrainerCallback):
    """The optimizer steps this call of the Trainer ran."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


def test_resume_after_kill_matches_uninterrupted(tiny_model_dir, examples, tmp_path, capsys):
    """Checkpoints every 3 steps and at each epoch's end (4 steps); a damaged newest one is
    named, set aside, and the run resumes from the one before (recomputing those steps)."""
    cfg = _cfg(tiny_model_dir, epochs=2, lora_dropout=0.1, save_steps=3)
    full = finetune(examples[:32], None, cfg, tmp_path / "full", max_length=64, progress=False)
    assert [p.name for p in full.epoch_checkpoints] == ["checkpoint-4", "checkpoint-8"]
    with pytest.raises(KeyboardInterrupt):
        finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False,
                 callbacks=[_KillAt(6)])  # fmt: skip
    trainer = tmp_path / "cut" / "trainer"
    assert sorted(p.name for p in trainer.iterdir()) == ["checkpoint-4", "checkpoint-6"]
    opt = trainer / "checkpoint-6" / "optimizer.pt"
    opt.write_bytes(opt.read_bytes()[: opt.stat().st_size // 2])  # damaged on disk
    capsys.readouterr()
    counter = _StepCounter()
    resumed = finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False,
                       callbacks=[counter])  # fmt: skip
    assert counter.steps == [5, 6, 7, 8]  # it resumed: a restart would give equal weights too
    out = capsys.readouterr().out
    assert f"checkpoint {trainer / 'checkpoint-6'} is corrupt: optimizer.pt is truncated" in out
    assert f"resumed from {trainer / 'checkpoint-4'}: step 4/8, epoch 2 at position 0/32" in out
    assert (trainer / "corrupt-checkpoint-6").is_dir()
    wf, wr = _adapter(full.final), _adapter(resumed.final)
    for k in wf:  # resume restores weights, optimizer, scheduler, RNG and data order
        torch.testing.assert_close(wf[k], wr[k], rtol=1e-5, atol=1e-7)
    again = finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False)
    assert again.seconds == 0.0  # finished: not retrained


def _loss(model, recs) -> float:
    """Token-mean response loss of ``recs`` (independent of the Trainer's logging)."""
    with torch.no_grad():
        parts = [_token_loss_sum(model, r) for r in recs]
    return float(sum(p[0] for p in parts) / sum(p[1] for p in parts))


def _stalled_cli(argv, stall_step, env=None):
    """``python -m llm_validation ARGV`` in a child that stops (sleeps) after optimizer step
    ``stall_step`` and prints ``STALLED``; returns the Popen once it stalled."""
    script = textwrap.dedent(f'''
        import sys, time
        import llm_validation.train.trainer as T
        from transformers import TrainerCallback

        class Stall(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if state.global_step == {stall_step}:
                    print("STALLED", flush=True)
                    time.sleep(600)

        build = T.build_trainer
        T.build_trainer = lambda *a, callbacks=(), **k: build(
            *a, callbacks=[*callbacks, Stall()], **k)
        from llm_validation.__main__ import main
        raise SystemExit(main(sys.argv[1:]))
    ''')  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)  # fmt: skip
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == "STALLED":
            return proc, lines
    proc.wait()
    raise AssertionError(f"the child ended before step {stall_step}: {proc.stderr.read()}")


def finetune_config(root: Path, model: Path, train_file: Path, **finetune) -> Path:
    """A config with only what `finetune --settings ft` reads."""
    cfg = {"run_dir": str(root / "run"),
           "data": {"train_file": str(train_file), "max_length": 64},
           "finetune": {"model": str(model), "settings": ["ft"], "batch_size": 8,
                        "per_device_batch_size": 8, "lora_rank": 4, "lora_alpha": 8,
                        "lora_dropout": 0.1, "lora_targets": "attention", "lr": 1e-2,
                        "warmup_ratio": 0.1, **finetune}}  # fmt: skip
    path = root / "run.json"
    path.write_text(json.dumps(cfg))
    return path


def test_sigkill_mid_epoch_loses_at_most_save_steps(tiny_model_dir, data_files, tmp_path,
                                                    monkeypatch):  # fmt: skip
    """`finetune` killed with SIGKILL in epoch 2 resumes from its last every-4-steps checkpoint,
    says where, and ends with the weights (and loss) of an uninterrupted run."""
    from llm_validation.__main__ import main
    from llm_validation.config import load_config
    from llm_validation.experiments import pipeline
    from llm_validation.models.registry import load_model

    save_steps, kill_at = 4, 19  # 86 examples at batch 8: 11 steps per epoch, 22 in all
    cfg_path = finetune_config(tmp_path, tiny_model_dir, data_files[0], epochs=2,
                               save_steps=save_steps)  # fmt: skip
    proc, _ = _stalled_cli(["finetune", "--config", str(cfg_path), "--quiet"], kill_at)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    trainer = tmp_path / "run" / "finetune" / "ft" / "trainer"
    # the epoch-1 checkpoint and the newest every-4-steps one; 4, 8 and 12 were pruned
    assert sorted(p.name for p in trainer.iterdir()) == ["checkpoint-11", "checkpoint-16"]
    import contextlib
    import io

    from llm_validation.train import trainer as training

    counter, build = _StepCounter(), training.build_trainer
    monkeypatch.setattr(training, "build_trainer", lambda *a, callbacks=(), **k: build(
        *a, callbacks=[*callbacks, counter], **k))  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["finetune", "--config", str(cfg_path), "--quiet"]) == 0
    monkeypatch.undo()
    pattern = (r"resumed from \S+checkpoint-(\d+): step (\d+)/(\d+), epoch (\d+) at "
               r"position (\d+)/(\d+) \(step (\d+)/(\d+) of the epoch\)")  # fmt: skip
    said = re.search(pattern, buf.getvalue())
    assert said, buf.getvalue()
    step = int(said[2])
    assert 0 <= kill_at - step <= save_steps
    assert counter.steps == list(range(step + 1, 23))  # only the steps after the checkpoint
    per_epoch = math.ceil(86 / 8)
    assert [int(x) for x in said.groups()] == [
        step, step, 2 * per_epoch, step // per_epoch + 1, (step % per_epoch) * 8, 86,
        step % per_epoch, per_epoch,
    ]  # fmt: skip
    cfg = load_config(cfg_path, {"run_dir": str(tmp_path / "full")})
    pipeline.run_finetune(cfg, ["ft"], quiet=True)
    final = {name: tmp_path / name / "finetune" / "ft" / "final" for name in ("run", "full")}
    wr, wf = _adapter(final["run"]), _adapter(final["full"])
    for k in wf:
        torch.testing.assert_close(wr[k], wf[k], rtol=1e-5, atol=1e-7)
    train, _ = pipeline.load_split(cfg)
    base, tok = load_model(tiny_model_dir, device="cpu", dtype="float32")
    recs = tokenize_examples(train[:24], tok, max_length=64)
    from llm_validation.train.finetune import load_finetuned

    losses = {k: _loss(load_finetuned(tiny_model_dir, p, device="cpu", dtype="float32")[0], recs)
              for k, p in final.items()}  # fmt: skip
    assert losses["run"] == pytest.approx(losses["full"], rel=1e-6)
    assert losses["full"] < _loss(base, recs) - 0.05  # and the run trained something


def test_finetune_emits_no_warnings(tiny_model_dir, examples, tmp_path, capfd):
    """No warnings (Python's or transformers' logger) in a quiet fine-tune and its reload."""
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = finetune(examples[:16], None, _cfg(tiny_model_dir), tmp_path / "w", max_length=64,
                       progress=False)  # fmt: skip
        load_finetuned(tiny_model_dir, res.final, device="cpu", dtype="float32")
    assert [str(w.message) for w in caught] == []
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_missing_lora_target_fails_before_training(tiny_model_dir, examples, tmp_path):
    cfg = _cfg(tiny_model_dir, lora_targets=("q_proj", "dense_4h_to_h"))
    with pytest.raises(ValueError, match=r"\['dense_4h_to_h'\] do not exist in this llama model"):
        finetune(examples[:16], None, cfg, tmp_path / "x", progress=False)
    assert not (tmp_path / "x" / "trainer").exists()


def test_optimizer_without_sims_optim(tiny_model_dir, examples, tmp_path, monkeypatch):
    from llm_validation.train import trainer as training

    monkeypatch.setattr(training, "_sims_optim", lambda: None)
    with pytest.raises(ValueError, match="optimizer 'muon' needs `sims.optim`"):
        finetune(examples[:16], None, _cfg(tiny_model_dir, optimizer="muon"), tmp_path / "m",
                 progress=False)  # fmt: skip


@pytest.mark.parametrize(("optimizer", "kwargs"), [("muon", {}), ("fsam", {"rho": 0.05})])
def test_muon_and_fsam_through_sims_optim(tiny_model_dir, examples, tmp_path, optimizer, kwargs):
    """Muon and Functional-SAM come from sims.optim (FSAM through SAMFamilyTrainer)."""
    pytest.importorskip("sims.optim.factory")
    from llm_validation.train.trainer import trainer_class
    from sims.optim.hf import SAMFamilyTrainer

    assert (trainer_class(optimizer) is SAMFamilyTrainer) == (optimizer == "fsam")
    cfg = _cfg(tiny_model_dir, optimizer=optimizer, optimizer_kwargs=kwargs)
    res = finetune(examples[:32], None, cfg, tmp_path / optimizer, max_length=64, progress=False)
    ref = finetune(examples[:32], None, _cfg(tiny_model_dir), tmp_path / "adamw", max_length=64,
                   progress=False)  # fmt: skip
    assert res.steps == ref.steps == 4
    w, w0 = _adapter(res.final), _adapter(ref.final)
    assert all(torch.isfinite(v).all() for v in w.values())
    # a different optimizer moves the adapters elsewhere than AdamW from the same start
    assert any(not torch.allclose(w[k], w0[k], atol=1e-6) for k in w)
