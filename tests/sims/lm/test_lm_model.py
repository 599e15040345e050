"""sims.lm model: causal mask, RoPE relative positions, tied weights, config errors, diagnostics."""

import pytest
import torch

from sims.lm import GPT, GPTConfig
from sims.lm.model import Rotary
from sims.optim import partition_params

CFG = GPTConfig(vocab_size=32, seq_len=12, n_layer=2, n_head=2, d_model=16, dtype="float64")


def _model(**kw):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**CFG.__dict__, **kw}))


@pytest.mark.parametrize("activation", ["relu2", "gelu", "relu"])
def test_a_future_token_does_not_change_earlier_logits(activation):
    model = _model(activation=activation)
    x = torch.randint(0, 32, (3, 12))
    y = x.clone()
    y[:, 7] = (y[:, 7] + 5) % 32  # change token 7
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :7], b[:, :7], rtol=0, atol=0)
    assert (a[:, 7:] - b[:, 7:]).abs().max() > 1e-3  # and later positions do see it


def test_rope_scores_depend_only_on_relative_position():
    rot = Rotary(8, 32, 10000.0, torch.float64)
    g = torch.Generator().manual_seed(0)
    q, k = (
        torch.randn(8, generator=g, dtype=torch.float64),
        torch.randn(8, generator=g, dtype=torch.float64),
    )
    seq_q = q.expand(32, 8)[None, None]  # the same vector at every position
    seq_k = k.expand(32, 8)[None, None]
    rq, rk = rot(seq_q)[0, 0], rot(seq_k)[0, 0]  # (T, d)
    score = rq @ rk.T  # (T, T): depends on t_q - t_k only
    for shift in (1, 5):
        torch.testing.assert_close(
            score[shift:, shift:], score[:-shift, :-shift], rtol=1e-12, atol=1e-12
        )
    assert abs(float(score[3, 0] - score[3, 1])) > 1e-6  # and does depend on it
    # rotation preserves norms
    torch.testing.assert_close(rq.norm(dim=-1), q.norm().expand(32), rtol=1e-12, atol=0)


def test_tied_embeddings_share_one_tensor_and_gradient():
    model = _model()
    assert model.lm_head.weight is model.wte.weight
    assert model.num_params() == sum(p.numel() for p in model.parameters())
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names
    untied = _model(tie_embeddings=False)
    assert untied.num_params() == model.num_params() + 32 * 16
    part = partition_params(model)
    assert part.names["embeddings"] == ["wte.weight"] and part.names["head"] == []
    assert all(n.endswith("norm1.weight") or n.endswith("norm2.weight") or n == "norm.weight"
               for n in part.names["other"])  # fmt: skip
    assert len(part.names["hidden"]) == 2 * 4
    assert partition_params(untied).names["head"] == ["lm_head.weight"]


def test_scaled_init():
    torch.manual_seed(0)
    model = GPT(GPTConfig(d_model=128, n_head=2, n_layer=4, mlp_ratio=4)).requires_grad_(False)
    assert float(model.blocks[0].mlp.fc.weight.std()) == pytest.approx(0.02, rel=0.05)
    assert float(model.blocks[0].mlp.proj.weight.std()) == pytest.approx(0.02 / 8**0.5, rel=0.05)
    assert torch.equal(model.norm.weight, torch.ones(128))


def test_float64_model_is_float64_throughout():
    model = _model()
    assert all(p.dtype == torch.float64 for p in model.parameters())
    assert model.blocks[0].attn.rotary.cos.dtype == torch.float64
    assert model(torch.zeros(1, 4, dtype=torch.long)).dtype == torch.float64


def test_forward_mode_ad_and_tau_identity_hold():
    from sims.optim import diagnostics as dg

    model = _model()
    x = torch.randint(0, 32, (2, 13))
    params, logits_fn = dg.functionalize(model, x[:, :-1])
    tau = dg.tau_fractions(logits_fn, dg.cross_entropy_loss(x[:, 1:]), params, check=True)
    assert tau.check_residual < 1e-10  # δ_logit + δ_func = H_L ε* from an independent HVP
    assert tau.tau_logit + tau.tau_func + tau.tau_cross == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(d_model=15), "multiple of `n_head`"),
        (dict(d_model=6, n_head=2), "even head dimension"),
        (dict(activation="swish"), "`activation`"),
        (dict(dtype="float16"), "`dtype`"),
        (dict(n_layer=0), "`n_layer`"),
    ],
)
def test_config_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        GPTConfig(**{**CFG.__dict__, **kw})


def test_too_long_input_is_an_error():
    with pytest.raises(ValueError, match="exceeds `seq_len`"):
        _model()(torch.zeros(1, 13, dtype=torch.long))


# --- every module inside its caller (issue 24: a rotary applied to the queries only passed) ---


def _rope_complex(x, base):
    """RoPE written independently: pair (x_i, x_{i+d/2}) as x_i + i·x_{i+d/2}, rotate by t·θ_i."""
    T, hd = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    z = torch.complex(x[..., : hd // 2], x[..., hd // 2 :])
    z = z * torch.polar(torch.ones(T, hd // 2, dtype=torch.float64),
                        torch.arange(T, dtype=torch.float64)[:, None] * theta)  # fmt: skip
    return torch.cat([z.real, z.imag], dim=-1)


def _reference_forward(model, idx):
    """GPT forward re-derived from the parameters (nanoGPT's equations), no module calls."""
    cfg = model.config
    H, D = cfg.n_head, cfg.d_model
    hd = D // H

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * w

    x = model.wte.weight[idx]
    T = idx.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for blk in model.blocks:
        h = rms(x, blk.norm1.weight)
        qkv = h @ blk.attn.qkv.weight.T
        q, k, v = (t.reshape(*t.shape[:2], H, hd).transpose(1, 2) for t in qkv.split(D, -1))
        q, k = _rope_complex(q, cfg.rope_base), _rope_complex(k, cfg.rope_base)
        s = (q @ k.transpose(-1, -2)) / hd**0.5
        a = torch.softmax(s.masked_fill(~causal, float("-inf")), -1)
        x = x + (a @ v).transpose(1, 2).reshape(*idx.shape, D) @ blk.attn.proj.weight.T
        h = rms(x, blk.norm2.weight) @ blk.mlp.fc.weight.T
        h = {"relu2": torch.relu(h) ** 2, "gelu": torch.nn.functional.gelu(h),
             "relu": torch.relu(h)}[cfg.activation]  # fmt: skip
        x = x + h @ blk.mlp.proj.weight.T
    return rms(x, model.norm.weight) @ model.wte.weight.T


@pytest.mark.parametrize("activation", ["relu2", "gelu"])
def test_model_forward_equals_the_equations(activation):
    """The whole model against its equations: RoPE on queries AND keys inside the attention,
    both norms, the activation, the residuals and the tied head."""
    model = _model(activation=activation, rope_base=50.0)  # large rotations at small t
    x = torch.randint(0, 32, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(x), _reference_forward(model, x), rtol=1e-10, atol=1e-12)


def test_attention_scores_inside_the_model_depend_on_relative_position_only(monkeypatch):
    """With the same input vector at every position, the attention logits of the model's own
    attention are a function of t_q − t_k (RoPE on q and k), and not a constant."""
    attn = _model(rope_base=50.0).blocks[0].attn
    x = torch.randn(1, 1, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x = x.expand(1, 12, 16)
    scores = {}
    orig = torch.Tensor.softmax

    def spy(self, dim):  # the logits are what the attention's softmax receives
        scores["s"] = self.clone()
        return orig(self, dim)

    monkeypatch.setattr(torch.Tensor, "softmax", spy)
    with torch.no_grad():
        attn(x)
    monkeypatch.undo()
    s = scores["s"][0, 0]  # (T, T), -inf above the diagonal
    low = torch.tril(torch.ones(12, 12, dtype=torch.bool))
    for shift in (1, 4):
        a, b = s[shift:, shift:], s[:-shift, :-shift]
        torch.testing.assert_close(a[low[shift:, shift:]], b[low[:-shift, :-shift]],
                                   rtol=1e-11, atol=1e-12)  # fmt: skip
    assert float((s[5, 0] - s[5, 3]).abs()) > 1e-4  # and they do depend on it
