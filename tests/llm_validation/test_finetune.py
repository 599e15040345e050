"""LoRA fine-tuning: adapter-only updates, upsampled sizes, accumulation, resume, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from llm_validation.config import FinetuneConfig
from llm_validation.data import Example
from llm_validation.finetune import finetune, load_finetuned, plan_finetune
from llm_validation.training import latest_checkpoint


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


class _KillAfterEpoch(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        if state.epoch is not None and round(state.epoch) == 1:
            raise KeyboardInterrupt


def test_resume_after_kill_matches_uninterrupted(tiny_model_dir, examples, tmp_path):
    cfg = _cfg(tiny_model_dir, epochs=2, lora_dropout=0.1)
    full = finetune(examples[:32], None, cfg, tmp_path / "full", max_length=64, progress=False)
    assert [p.name for p in full.epoch_checkpoints] == ["checkpoint-4", "checkpoint-8"]
    with pytest.raises(KeyboardInterrupt):
        finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False,
                 callbacks=[_KillAfterEpoch()])  # fmt: skip
    assert latest_checkpoint(tmp_path / "cut" / "trainer").name == "checkpoint-4"
    resumed = finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False)
    wf, wr = _adapter(full.final), _adapter(resumed.final)
    for k in wf:  # resume restores weights, optimizer, scheduler, RNG and data order
        torch.testing.assert_close(wf[k], wr[k], rtol=1e-5, atol=1e-7)
    again = finetune(examples[:32], None, cfg, tmp_path / "cut", max_length=64, progress=False)
    assert again.seconds == 0.0  # finished: not retrained


def test_missing_lora_target_fails_before_training(tiny_model_dir, examples, tmp_path):
    cfg = _cfg(tiny_model_dir, lora_targets=("q_proj", "dense_4h_to_h"))
    with pytest.raises(ValueError, match=r"\['dense_4h_to_h'\] do not exist in this llama model"):
        finetune(examples[:16], None, cfg, tmp_path / "x", progress=False)
    assert not (tmp_path / "x" / "trainer").exists()


def test_optimizer_without_sims_optim(tiny_model_dir, examples, tmp_path, monkeypatch):
    from llm_validation import training

    monkeypatch.setattr(training, "_sims_optim", lambda: None)
    with pytest.raises(ValueError, match="optimizer 'muon' needs `sims.optim`"):
        finetune(examples[:16], None, _cfg(tiny_model_dir, optimizer="muon"), tmp_path / "m",
                 progress=False)  # fmt: skip
