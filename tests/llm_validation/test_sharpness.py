"""τ fractions and λ_max of a LoRA-wrapped HF model against independent constructions.

The references here use none of ``sims.optim.diagnostics``/``torch.func`` (whose forward-mode
JVPs the library uses): the loss is written out from the model's ``.logits`` with the Hugging
Face label shift (pad, then drop the first label); ``g`` and ``Jᵀw`` come from plain
``torch.autograd.grad`` on the module's own parameters, and the second-order pieces
``H_L ε`` and ``J ε`` either by reverse-over-reverse (double backward, eager attention) or by
central finite differences (on the model's own SDPA attention); ``H_G ε = Jᵀ H_out J ε`` with
the softmax Hessian written out, ``δ_func = H_L ε − H_G ε``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from llm_validation.data.records import Example
from llm_validation.experiments import sharpness as sh

# Exact AD both ways, of the same computed function; but HF's RMSNorm and attention softmax
# run in float32 inside a float64 model, so forward- and reverse-mode products round
# differently at float32's ~6e-8 (measured: 5e-9 on τ).
TOL = 1e-7
# Finite differences: HF's RMSNorm and attention softmax compute in float32 even in a float64
# model, so the function carries ~1e-7 relative noise; the best step is ~1e-3 (measured: τ
# errors 9e-4 at h=1e-2, 6e-5 at 1e-3, 1.5e-4 at 1e-4, 1.4e-3 at 1e-5). Every planted bug
# moves τ by > 1e-2, so 5e-4 still separates.
H, TOL_FD = 1e-3, 5e-4


def _examples(records, idx):
    return [Example(records[i]["instruction"], records[i]["output"], records[i]["source"], i)
            for i in idx]  # fmt: skip


def _lora_model(model_dir, *, sharpen=True, random_b=True, seed=0):
    """The tiny Llama in float64 with rank-1 LoRA on q/v; logits sharpened, ``B`` random.

    Sharpening the (tied) embeddings makes the predictions confident, so that τ_logit, τ_func
    and τ_cross are all clearly non-zero and different (a swap or a wrong parameter set shows).
    """
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model

    model, tok = load_model(model_dir, dtype="float32", device="cpu")
    model = model.double()
    if sharpen:
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(8.0)
    model = apply_lora(model, rank=1, alpha=2.0, dropout=0.0, targets=["q_proj", "v_proj"],
                       seed=seed)  # fmt: skip
    if random_b:
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    model.eval()
    return model, tok


def _reference_loss(model, b):
    logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
    labels = torch.nn.functional.pad(b["labels"], (0, 1), value=-100)[:, 1:]  # HF's shift
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1)), logits


def _independent_tau(model, b, params, *, fd=False):
    """τ fractions w.r.t. the tensors ``params`` (module parameters) by ``torch.autograd``.

    ``H_L ε`` and ``J ε`` by reverse-over-reverse (double backward; ``J ε`` via the VJP of a
    VJP), or with ``fd=True`` by central finite differences of ``∇L`` and ``Z``.
    """
    saved = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    ids, mask = b["input_ids"], b["attention_mask"]
    try:

        def shift(eps, t):
            with torch.no_grad():
                for p, e in zip(params, eps, strict=True):
                    p.add_(t * e)

        loss, logits = _reference_loss(model, b)
        g = torch.autograd.grad(loss, params, create_graph=not fd, retain_graph=True)
        gn = math.sqrt(sum(float((x * x).sum()) for x in g))
        eps = [x.detach() / gn for x in g]
        if fd:
            shift(eps, H)
            g_plus = torch.autograd.grad(_reference_loss(model, b)[0], params)
            with torch.no_grad():
                z_plus = model(input_ids=ids, attention_mask=mask).logits
            shift(eps, -2 * H)
            g_minus = torch.autograd.grad(_reference_loss(model, b)[0], params)
            with torch.no_grad():
                z_minus = model(input_ids=ids, attention_mask=mask).logits
            shift(eps, H)
            hl = [(a - c) / (2 * H) for a, c in zip(g_plus, g_minus, strict=True)]
            u = (z_plus - z_minus) / (2 * H)  # J ε
        else:
            gdot = sum((x * e).sum() for x, e in zip(g, eps, strict=True))
            hl = torch.autograd.grad(gdot, params, retain_graph=True)  # ∇(gᵀε) = H_L ε
            w = torch.zeros_like(logits, requires_grad=True)
            jtw = torch.autograd.grad(logits, params, grad_outputs=w, create_graph=True)
            u = torch.autograd.grad(
                sum((x * e).sum() for x, e in zip(jtw, eps, strict=True)), w, retain_graph=True
            )[0]  # ∂/∂w ⟨Jᵀw, ε⟩ = J ε
        _, logits = _reference_loss(model, b)  # a fresh graph at θ (FD moved θ in place)
        labels = torch.nn.functional.pad(b["labels"], (0, 1), value=-100)[:, 1:]
        keep = (labels != -100).to(logits.dtype)[..., None]
        p = torch.softmax(logits.detach(), -1)
        w = keep * p * (u - (p * u).sum(-1, keepdim=True)) / keep.sum()  # H_out J ε
        hg = torch.autograd.grad(logits, params, grad_outputs=w)  # Jᵀ H_out J ε
    finally:
        for p, s in zip(model.parameters(), saved, strict=True):
            p.requires_grad_(s)
    hf = [a - c for a, c in zip(hl, hg, strict=True)]
    ll = sum(float((x * x).sum()) for x in hg)
    ff = sum(float((x * x).sum()) for x in hf)
    lf = sum(float((x * y).sum()) for x, y in zip(hg, hf, strict=True))
    total = ll + ff + 2 * lf
    return {
        "tau_logit": ll / total, "tau_func": ff / total, "tau_cross": 2 * lf / total,
        "loss": float(loss), "grad_norm": gn, "sharpness_grad_norm": math.sqrt(total),
    }  # fmt: skip


@pytest.fixture(scope="module")
def lora_setup(tiny_model_dir, records):
    model, tok = _lora_model(tiny_model_dir)
    b = sh.probe_batch(_examples(records, range(3)), tok, max_length=48)
    return model, tok, b


@pytest.mark.parametrize("which", ["lora", "last_mlp"])
def test_tau_matches_independent_autograd_and_finite_difference_constructions(lora_setup, which):
    model, _, b = lora_setup
    chosen = sh.select_params(model, which)
    named = dict(model.named_parameters())
    hf = model.get_base_model()
    attn = hf.config._attn_implementation
    hf.set_attn_implementation("eager")  # SDPA on CPU has no double backward
    try:
        ref = _independent_tau(model, b, [named[n] for n in chosen])
    finally:
        hf.set_attn_implementation(attn)
    fd = _independent_tau(model, b, [named[n] for n in chosen], fd=True)
    got = sh.measure_sharpness(model, b, params=which, lanczos_iters=0)
    for k in ("tau_logit", "tau_func", "tau_cross"):
        assert got[k] == pytest.approx(ref[k], abs=TOL), k
        assert got[k] == pytest.approx(fd[k], abs=TOL_FD), k
    assert got["tau_logit"] + got["tau_func"] + got["tau_cross"] == pytest.approx(1.0, abs=1e-12)
    assert got["sharpness_grad_norm"] == pytest.approx(ref["sharpness_grad_norm"], rel=TOL)
    assert got["grad_norm"] == pytest.approx(ref["grad_norm"], rel=1e-10)
    assert got["loss"] == pytest.approx(ref["loss"], rel=1e-12)
    assert got["check_residual"] < 1e-6  # δ_logit + δ_func = H_L ε* (float32 islands, above)
    assert got["n_params"] == sum(named[n].numel() for n in chosen)
    if which == "lora":  # a non-trivial split, so a swap or a wrong parameter set shows
        assert abs(ref["tau_logit"] - ref["tau_func"]) > 0.5 and abs(ref["tau_cross"]) > 0.5


def test_parameter_sets_are_the_adapters_and_the_last_mlp(lora_setup):
    model, _, b = lora_setup
    lora = sh.select_params(model, "lora")
    assert lora and all("lora_A" in n or "lora_B" in n for n in lora)
    assert len(lora) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)
    mlp = sh.select_params(model, "last_mlp")
    assert sorted(n.split(".")[-2] for n in mlp) == ["down_proj", "gate_proj", "up_proj"]
    assert all(".layers.1.mlp." in n for n in mlp)
    # HF's own loss (float32 internally) on the same batch: the probe loss is the pipeline's
    out = model(**b)
    got = sh.measure_sharpness(model, b, lanczos_iters=0, check=False)
    assert got["loss"] == pytest.approx(float(out.loss), rel=1e-6)


def test_lambda_max_is_the_top_eigenvalue_of_the_adapter_hessian(lora_setup):
    model, _, b = lora_setup
    params = [p for p in model.parameters() if p.requires_grad]
    hf = model.get_base_model()
    attn = hf.config._attn_implementation
    hf.set_attn_implementation("eager")  # SDPA on CPU has no double backward
    try:  # the full adapter Hessian, row by row, by plain double backward
        g = torch.autograd.grad(_reference_loss(model, b)[0], params, create_graph=True)
        g = torch.cat([x.flatten() for x in g])
        rows = [torch.cat([x.flatten() for x in torch.autograd.grad(gi, params,
                                                                     retain_graph=True)])
                for gi in g]  # fmt: skip
    finally:
        hf.set_attn_implementation(attn)
    hess = torch.stack(rows)
    assert float((hess - hess.T).abs().max()) < 1e-6 * float(hess.abs().max())  # see TOL
    exact = float(torch.linalg.eigvalsh((hess + hess.T) / 2)[-1])
    # 40 of the 224 Krylov dimensions: converged (measured 1e-9), at a sixth of the cost
    got = sh.measure_sharpness(model, b, lanczos_iters=40, check=False)["lambda_max"]
    assert got == pytest.approx(exact, rel=1e-6)  # float32 islands (see TOL)
    few = sh.measure_sharpness(model, b, lanczos_iters=3, check=False)
    assert few["lambda_max"] <= got * (1 + 1e-9)  # Lanczos Ritz values approach λ_max from below
    assert few["lambda_max"] >= few["curvature"] * (1 - 1e-9)  # started from the gradient
    one = sh.measure_sharpness(model, b, lanczos_iters=1, check=False)  # its Rayleigh quotient
    assert one["lambda_max"] == pytest.approx(one["curvature"], rel=1e-6)


def test_float64_copy_agrees_and_leaves_the_model_alone(tiny_model_dir, records):
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model

    model, tok = load_model(tiny_model_dir, dtype="float32", device="cpu")
    model = apply_lora(model, rank=2, alpha=4.0, dropout=0.1, targets="attention", seed=3)
    model.train()
    attn = model.get_base_model().config._attn_implementation
    b = sh.probe_batch(_examples(records, range(2)), tok, max_length=48)
    r64 = sh.measure_sharpness(model, b, dtype="float64", lanczos_iters=0)
    r32 = sh.measure_sharpness(model, b, lanczos_iters=0)
    assert next(model.parameters()).dtype == torch.float32 and model.training  # restored
    assert model.get_base_model().config._attn_implementation == attn
    assert r64["check_residual"] < 1e-6 and r32["check_residual"] < 1e-4  # float32 islands
    for k in ("tau_logit", "tau_func", "tau_cross"):  # float32 rounding, relative to O(1)
        assert r32[k] == pytest.approx(r64[k], abs=1e-4)


# ------------------------------------------------------------------------ along a fine-tune


def _cfg(model_dir, **kw):
    from llm_validation.config import FinetuneConfig

    base = dict(model=str(model_dir), settings=("ft",), lora_rank=2, lora_alpha=8.0,
                lora_targets="attention", epochs=1.0, lr=1e-2, warmup_ratio=0.0, batch_size=2,
                per_device_batch_size=2, dtype="float32", seed=0)  # fmt: skip
    return FinetuneConfig(**{**base, **kw})


def test_along_finetune_measures_the_init_then_the_trained_adapters(tiny_model_dir, records,
                                                                     tmp_path):  # fmt: skip
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model

    cfg = _cfg(tiny_model_dir)
    train, probe = _examples(records, range(8)), _examples(records, range(80, 83))
    kw = dict(steps=(0, 2, 4), max_length=48, param_sets=("lora", "last_mlp"), lanczos_iters=3)
    ds = sh.sharpness_along_finetune(train, probe, cfg, tmp_path / "s", **kw)
    assert ds.tau_logit.dims == ("param_set", "step")
    assert list(ds.step.values) == [0, 2, 4] and list(ds.param_set.values) == ["lora", "last_mlp"]
    total = (ds.tau_logit + ds.tau_func + ds.tau_cross).values
    np.testing.assert_allclose(total, 1.0, atol=1e-12)
    assert np.all(ds.check_residual.values < 1e-4)  # float32
    assert ds.attrs["train_steps"] == 4 and ds.attrs["n_probe"] == 3
    # step 0 is the LoRA initialization (B = 0), before any update: a fresh model agrees
    model, tok = load_model(tiny_model_dir, dtype="float32", device="cpu")
    model = apply_lora(model, rank=2, alpha=8.0, dropout=0.05, targets="attention", seed=0)
    b = sh.probe_batch(probe, tok, max_length=48)
    for which in ("lora", "last_mlp"):
        fresh = sh.measure_sharpness(model, b, params=which, lanczos_iters=3)
        for k in ("tau_logit", "tau_func", "loss", "grad_norm", "lambda_max"):
            assert float(ds[k].sel(param_set=which, step=0)) == pytest.approx(fresh[k], rel=1e-9)
    # and training moved the adapters: the probe loss is no longer the initial one
    assert abs(float(ds.loss.sel(param_set="lora", step=4) - ds.loss.sel(param_set="lora",
                                                                       step=0))) > 1e-4  # fmt: skip
    # a second call reuses the finished run and the saved measurements
    files = sorted((tmp_path / "s" / "measurements").glob("step-*.json"))
    assert len(files) == 3
    mtimes = [f.stat().st_mtime_ns for f in files]
    again = sh.sharpness_along_finetune(train, probe, cfg, tmp_path / "s", **kw)
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    np.testing.assert_array_equal(again.tau_logit.values, ds.tau_logit.values)


def test_recorder_resumes_without_remeasuring(lora_setup, tmp_path):
    model, _, b = lora_setup
    rec = sh.SharpnessRecorder(b, [0, 3], tmp_path, lanczos_iters=0)
    first = rec.record(model, 3)
    mtime = rec.path(3).stat().st_mtime_ns
    again = rec.record(model, 3)
    assert rec.path(3).stat().st_mtime_ns == mtime
    assert again["measurements"]["lora"]["tau_logit"] == first["measurements"]["lora"]["tau_logit"]
    assert math.isnan(again["measurements"]["lora"]["lambda_max"])  # NaN survives the JSON
    assert rec.missing() == [0]
    with pytest.raises(RuntimeError, match=r"steps \[0\]"):
        rec.to_dataset()


# ------------------------------------------------------------------------ bad input


def test_a_model_without_trainable_parameters_is_refused(tiny_model_dir, records):
    from llm_validation.models.registry import load_model

    model, tok = load_model(tiny_model_dir, dtype="float32", device="cpu")
    model.requires_grad_(False)
    b = sh.probe_batch(_examples(records, range(2)), tok, max_length=48)
    with pytest.raises(ValueError, match="no trainable parameters.*apply_lora"):
        sh.measure_sharpness(model, b)
    with pytest.raises(ValueError, match="matches no parameter"):
        sh.measure_sharpness(model, b, params=r"lora_A")


@pytest.mark.parametrize(
    ("steps", "match"),
    [((0, 5), r"\[5\] are not optimizer steps of this run \(0 \.\. 4\)"),
     ((-1, 2), r"\[-1\] are not optimizer steps"), ((), "at least one"),
     ((0, 1.5), "must be ints"), ((2, 2), "duplicates")],
)  # fmt: skip
def test_unknown_steps_fail_before_loading_the_model(records, tmp_path, steps, match):
    cfg = _cfg(tmp_path / "no-such-model")  # loading it would fail differently
    train, probe = _examples(records, range(8)), _examples(records, range(80, 82))
    with pytest.raises(ValueError, match=match):
        sh.sharpness_along_finetune(train, probe, cfg, tmp_path / "s", steps=steps)
    assert not (tmp_path / "s").exists()


def test_other_bad_input(tiny_model_dir, records, tmp_path, lora_setup):
    train, probe = _examples(records, range(8)), _examples(records, range(80, 82))
    with pytest.raises(ValueError, match="lora=True"):
        sh.sharpness_along_finetune(train, probe, _cfg(tiny_model_dir, lora=False), tmp_path,
                                    steps=(0,))  # fmt: skip
    with pytest.raises(ValueError, match="`probe` must hold"):
        sh.sharpness_along_finetune(train, [], _cfg(tiny_model_dir), tmp_path, steps=(0,))
    with pytest.raises(ValueError, match="matches no parameter"):
        sh.sharpness_along_finetune(
            train, probe, _cfg(tiny_model_dir), tmp_path / "s", steps=(0,),
            param_sets=("lora", "nonexistent_proj"),
        )  # fmt: skip
    assert not (tmp_path / "s").exists()  # refused before training
    model, tok, b = lora_setup
    with pytest.raises(ValueError, match="`lanczos_iters` must be an int >= 0"):
        sh.measure_sharpness(model, b, lanczos_iters=-1)
    with pytest.raises(ValueError, match="`dtype` must be"):
        sh.measure_sharpness(model, b, dtype="float16")
    with pytest.raises(ValueError, match="lacks"):
        sh.measure_sharpness(model, {"input_ids": b["input_ids"]})
    with pytest.raises(ValueError, match="max_length"):
        sh.probe_batch(probe, tok, max_length=4)  # the prompt alone fills the window
