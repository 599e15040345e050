"""SAMFamilyTrainer: the Hugging Face Trainer with the SAM family, gradient accumulation too."""

import copy
import subprocess
import sys

import pytest
import torch

from sims.optim import SAMFamily, build_optimizer
from tests.core_only import _PRELUDE, REPO

transformers = pytest.importorskip("transformers")
from sims.optim.hf import SAMFamilyTrainer  # noqa: E402

N = 8


class _Tokens(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 64, (N, 12), generator=g)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class _NoKwargsLM(torch.nn.Module):
    """A causal LM whose forward takes no loss kwargs: the Trainer divides its loss by k."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 16, dtype=torch.float64)
        self.head = torch.nn.Linear(16, 64, dtype=torch.float64)

    def forward(self, input_ids, labels=None):
        logits = self.head(torch.tanh(self.emb(input_ids)))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, 64), labels[:, 1:].reshape(-1)
            )
        return out


def _model():
    if _model.kind == "nokwargs":
        torch.manual_seed(0)
        return _NoKwargsLM()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False,
        max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg).double()


_model.kind = "llama"


def _train(tmp_path, name, batch, accum, setup=None, **opt_kw):
    model = _model()
    if setup is not None:
        setup(model)
    opt = build_optimizer(name, model, lr=0.05, weight_decay=0.1, **opt_kw)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / f"{name}-{batch}-{accum}"), per_device_train_batch_size=batch,
        gradient_accumulation_steps=accum, max_steps=1, learning_rate=0.05,
        lr_scheduler_type="constant", warmup_steps=0, report_to=[], save_strategy="no",
        logging_strategy="no", use_cpu=True, seed=0, disable_tqdm=True, max_grad_norm=1.0,
        dataloader_num_workers=0,
    )  # fmt: skip
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=_Tokens(),
                               optimizers=(opt, None))  # fmt: skip
    trainer.train()
    return model, opt


def _reference(name, **opt_kw):
    """One SAM-family step on the whole batch, without the Trainer."""
    model = _model()
    opt = build_optimizer(name, model, lr=0.05, weight_decay=0.1, **opt_kw)
    ids = _Tokens().ids
    model.train()

    def closure():
        out = model(input_ids=ids, labels=ids)
        return out["loss"], out["logits"]

    opt.step(closure)
    return model


@pytest.mark.parametrize(
    "name, kw", [("sam", {"rho": 0.2}), ("fsam", {"rho": 0.2}), ("pfsam", {"rho": 0.2}),
                 ("angle_sam", {"rho": 0.2, "angle_weights": (0.3, 0.6)})],
)  # fmt: skip
def test_trainer_accumulation_equals_one_large_batch(tmp_path, name, kw):
    ref = _reference(name, **kw)
    for batch, accum in ((N, 1), (N // 2, 2), (N // 4, 4)):
        model, opt = _train(tmp_path, name, batch, accum, **kw)
        assert isinstance(opt, SAMFamily) and opt.sam_steps == 1
        for (n, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12, msg=f"{n} {batch}x{accum}")
    # and the step did something beyond AdamW (rho matters at this size)
    adamw = _model()
    for p, q in zip(adamw.parameters(), ref.parameters(), strict=True):
        assert not torch.equal(p, q)


@pytest.mark.parametrize("name", ["sam", "fsam"])
def test_accumulation_with_a_model_that_takes_no_loss_kwargs(tmp_path, monkeypatch, name):
    # here the Trainer (not the model) scales each micro-batch loss by 1/k
    monkeypatch.setattr(_model, "kind", "nokwargs")
    ref = _reference(name, rho=0.3)
    for batch, accum in ((N // 2, 2), (N // 4, 4)):
        model, opt = _train(tmp_path, name, batch, accum, rho=0.3)
        assert opt.sam_steps == 1
        for p, q in zip(model.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_non_sam_optimizer_defers_to_the_trainer(tmp_path):
    model, _ = _train(tmp_path, "adamw", N // 2, 2)
    plain = _model()
    opt = build_optimizer("adamw", plain, lr=0.05, weight_decay=0.1)
    ids = _Tokens().ids
    loss = plain(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
    opt.step()
    for p, q in zip(model.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_trainer_pass_counts_with_accumulation(tmp_path):
    counts = {"f": 0}

    def setup(model):
        model.register_forward_hook(lambda *a: counts.__setitem__("f", counts["f"] + 1))

    _train(tmp_path, "fsam", N // 4, 4, setup=setup, rho=0.1)
    assert counts["f"] == 2 * 4  # pass 1 and pass 2 of each of the 4 micro-batches


def test_fp16_is_refused_with_a_clear_message(tmp_path):
    model = _model().float()
    opt = build_optimizer("fsam", model, lr=0.05)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                                          max_steps=1, per_device_train_batch_size=4)  # fmt: skip
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=_Tokens(),
                               optimizers=(opt, None))  # fmt: skip
    trainer.args.fp16 = True  # as if requested (fp16 itself is unavailable on this CPU build)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match="fp16 loss scaling"):
        trainer.training_step(model, {"input_ids": _Tokens().ids[:2], "labels": _Tokens().ids[:2]})
    for k, v in model.state_dict().items():
        assert torch.equal(before[k], v)


def test_without_transformers_the_import_names_the_extra():
    code = _PRELUDE + "import sims.optim.hf\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode != 0
    assert "needs the `llm` extra" in proc.stderr and "pip install" in proc.stderr
