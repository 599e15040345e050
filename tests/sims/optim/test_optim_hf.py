"""SAMFamilyTrainer: the Hugging Face Trainer with the SAM family: gradient accumulation, bf16 and
fp16 mixed precision, refused configurations. (Several processes: test_optim_distributed.py.)"""

import contextlib
import copy
import subprocess
import sys
import warnings

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


def test_without_transformers_the_import_names_the_extra():
    code = _PRELUDE + "import sims.optim.hf\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode != 0
    assert "needs the `llm` extra" in proc.stderr and "pip install" in proc.stderr


# ---------------------------------------------------------------- mixed precision in the Trainer


class _Recording:
    """Mixin: record the gradient the base optimizer receives at every step."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.received = []

    @torch.no_grad()
    def step(self, closure=None):
        self.received.append(torch.cat([p.grad.flatten().clone() for g in self.param_groups
                                        for p in g["params"] if p.grad is not None]))  # fmt: skip
        return super().step(closure)


class _RecSGD(_Recording, torch.optim.SGD):
    pass


class _RecAdamW(_Recording, torch.optim.AdamW):
    pass


class _Counted(_Tokens):
    """Labels -100 at position 0 (never a target after the shift), so the Trainer's count of
    labelled tokens (``num_items_in_batch``, taken before the shift) equals the loss's."""

    def __getitem__(self, i):
        labels = self.ids[i].clone()
        labels[0] = -100
        return {"input_ids": self.ids[i], "labels": labels}


def _gpt2():
    """A tiny GPT-2 (tied head, no dropout): float32 master weights, as the Trainer keeps them."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=64, n_positions=16,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    return transformers.GPT2LMHeadModel(cfg)


AMP = {
    "sam": dict(variant="sam"),
    "fsam": dict(variant="fsam"),
    "lsam": dict(variant="lsam"),
    "angle_sam": dict(variant="angle_sam", angle_weights=(0.3, 0.8)),
    "asam": dict(variant="sam", adaptive=True, rho=2.0),  # ASAM's ρ is in units of |θ|
    "psam": dict(variant="sam", precondition=True),
    "pfsam": dict(variant="fsam", precondition=True),
}


def _amp_opt(model, name, rho=None):
    kw = dict(AMP[name])
    default = kw.pop("rho", 0.2)
    rho = default if rho is None else rho
    if kw.get("precondition"):  # eps 1e-3 keeps M⁻¹ bounded (a 1e-8 eps makes M⁻¹g ≈ sign(g))
        return SAMFamily(model.parameters(), _RecAdamW, rho, lr=1e-3, eps=1e-3, **kw)
    return SAMFamily(model.parameters(), _RecSGD, rho, lr=0.1, **kw)


def _amp_trainer(tmp_path, name, mode, *, scaler=None, hook=None, steps=2):
    model = _gpt2()
    if hook is not None:
        model.register_forward_hook(hook)
    opt = _amp_opt(model, name)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / f"{name}-{mode}"), per_device_train_batch_size=N,
        max_steps=steps, report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
        seed=0, disable_tqdm=True, dataloader_num_workers=0, **{mode: True},
    )  # fmt: skip
    warns = pytest.warns(UserWarning, match="no fp16 mixed precision")
    with warns if mode == "fp16" else contextlib.nullcontext():  # on this CPU, it has none
        trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=_Counted(),
                                   optimizers=(opt, None))  # fmt: skip
    if scaler is not None:  # accelerate turns fp16 off on a CPU: hand it a CPU scaler + autocast
        trainer.accelerator.scaler, trainer.accelerator.native_amp = scaler, True
    trainer.train()
    return opt


def _amp_reference(name, rho=None, steps=2):
    """float32, no Trainer: the same steps on the whole batch (the Trainer's batch is all of it)."""
    model = _gpt2()
    opt = _amp_opt(model, name, rho)
    batch = torch.utils.data.default_collate([_Counted()[i] for i in range(N)])
    for _ in range(steps):
        opt.step(lambda: (lambda out: (out.loss, out.logits))(model(**batch)))
    return opt.base_optimizer.received


def _rel(a, b):
    return max(float((x - y).norm() / y.norm()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", list(AMP))
def test_bf16_trainer_runs_every_variant_within_tolerance_of_float32(tmp_path, name):
    """bf16=True (CPU autocast): each step's SAM-family gradient within 4e-2 of float32's.

    Before the fix every variant but SAM crashed (accelerate returns a float32 copy of the
    logits made after the loss). bf16's unit roundoff is 3.9e-3; measured errors (tiny GPT-2,
    2 steps) are 4.1e-3 (ASAM) to 7.0e-3 (SAM), 1.1e-2 and 1.9e-2 for PFSAM and PSAM (M⁻¹
    amplifies), while ρ moves the gradient by 0.16 (LSAM) to 1.3 (checked below: the logit path
    must be the right one, not merely run).
    """
    ref = _amp_reference(name)
    opt = _amp_trainer(tmp_path, name, "bf16")
    assert opt.sam_steps == 2
    assert _rel(opt.base_optimizer.received, ref) < 4e-2
    assert _rel(_amp_reference(name, rho=0.0), ref) > 0.1


@pytest.mark.parametrize("name", ["sam", "fsam", "angle_sam"])
def test_fp16_trainer_with_a_grad_scaler_within_tolerance_of_float32(tmp_path, name):
    """fp16 + the Trainer's GradScaler (scale 2^12): within 5e-3 of float32 (measured 7.8e-4 to
    8.2e-4; fp16's unit roundoff is 4.9e-4).

    Pass 1 is scaled by ``accelerator.backward`` and unscaled by the Trainer's clip; the later
    passes are scaled and unscaled by the optimizer; an unscaled pass would be 4096x off.
    """
    ref = _amp_reference(name)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    opt = _amp_trainer(tmp_path, name, "fp16", scaler=scaler)
    assert opt.grad_scaler is scaler and opt.sam_steps == 2 and scaler.get_scale() == 2.0**12
    assert _rel(opt.base_optimizer.received, ref) < 5e-3


def test_fp16_trainer_overflow_in_pass_one_skips_that_window_only(tmp_path):
    calls = {"n": 0}

    def overflow_first_call(module, args, out):
        calls["n"] += 1
        if calls["n"] == 1:
            out.logits.mul_(float("inf"))
            out.loss.mul_(float("inf"))
        return out

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12)
    opt = _amp_trainer(tmp_path, "fsam", "fp16", scaler=scaler, hook=overflow_first_call)
    # window 1: pass 1 only (the scaler skips the step); window 2: passes 1 and 2 of its own
    # micro-batch only (the skipped window's queued micro-batch is dropped)
    assert calls["n"] == 1 + 2
    assert opt.sam_steps == 1 and scaler.get_scale() == 2.0**11


def test_logits_the_loss_was_not_computed_from_are_refused(tmp_path):
    class Detached(_NoKwargsLM):
        def forward(self, input_ids, labels=None):
            out = super().forward(input_ids, labels)
            out["logits"] = out["logits"].detach().requires_grad_(True)
            return out

    torch.manual_seed(0)
    model = Detached()
    opt = build_optimizer("fsam", model, lr=0.05)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                                          max_steps=1, per_device_train_batch_size=4)  # fmt: skip
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=_Tokens(),
                               optimizers=(opt, None))  # fmt: skip
    ids = _Tokens().ids[:2]
    trainer.current_gradient_accumulation_steps = 1
    with pytest.raises(ValueError, match="does not depend on the model's returned logits"):
        trainer.training_step(model, {"input_ids": ids, "labels": ids})


@pytest.mark.parametrize("what", ["is_fsdp_enabled", "is_deepspeed_enabled", "dataparallel"])
def test_sharded_and_single_process_multi_gpu_setups_are_refused(tmp_path, what, monkeypatch):
    model = _model().float()
    opt = build_optimizer("fsam", model, lr=0.05)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                                          max_steps=1, per_device_train_batch_size=4)  # fmt: skip
    trainer = SAMFamilyTrainer(model=model, args=args, train_dataset=_Tokens(),
                               optimizers=(opt, None))  # fmt: skip
    if what == "dataparallel":
        monkeypatch.setattr(type(args), "n_gpu", property(lambda self: 2))
        match = "DataParallel over 2 GPUs"
    else:
        monkeypatch.setattr(trainer, what, True)
        match = {"is_fsdp_enabled": "FSDP", "is_deepspeed_enabled": "DeepSpeed"}[what]
    before = copy.deepcopy(model.state_dict())
    ids = _Tokens().ids[:2]
    with pytest.raises(ValueError, match=match):
        trainer.training_step(model, {"input_ids": ids, "labels": ids})
    for k, v in model.state_dict().items():
        assert torch.equal(before[k], v)


@pytest.mark.parametrize("mode", ["fp16", "bf16", "fp32"])
def test_fp16_on_a_device_without_fp16_amp_warns(tmp_path, mode):
    """accelerate accepts fp16=True on the CPU and trains in float32 without a scaler: we say so
    (SAMFamilyTrainer, and the plain Trainer through llm_validation's build_trainer helper)."""
    from sims.optim.hf import warn_if_fp16_unavailable

    flags = {mode: True} if mode != "fp32" else {}
    args = transformers.TrainingArguments(output_dir=str(tmp_path / mode), use_cpu=True,
                                          report_to=[], **flags)  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer = SAMFamilyTrainer(model=_model(), args=args, train_dataset=_Tokens())
        plain = transformers.Trainer(model=_model(), args=args, train_dataset=_Tokens())
        assert warn_if_fp16_unavailable(plain) is (mode == "fp16")
    mine = [w for w in seen if "no fp16 mixed precision" in str(w.message)]
    assert len(mine) == (2 if mode == "fp16" else 0), [str(w.message) for w in seen]
    if mode == "fp16":
        assert trainer.accelerator.native_amp is False  # the premise: no fp16 autocast here
        assert "float32 without loss scaling" in str(mine[0].message)
        trainer.accelerator.native_amp = True  # as on a GPU: fp16 autocast exists, no warning
        assert warn_if_fp16_unavailable(trainer) is False
