import pytest
import torch
import torch.nn.functional as F

from sims.markov.models import (
    FullConfig,
    FullTransformer,
    MinimalAttention,
    MinimalConfig,
    build_model,
    param_groups,
)


def naive_minimal(model, x):
    """App. B minimal model written literally with one-hot x~ = [e_x; e_p]."""
    c = model.config
    B, L = x.shape
    Xt = torch.cat([F.one_hot(x, c.d).float(), torch.eye(L).expand(B, L, L)], -1)  # (B, L, D)
    ok = torch.ones(L, L, dtype=torch.bool).tril()
    if c.context is not None:
        ok &= ~torch.ones(L, L, dtype=torch.bool).tril(-c.context)
    out = 0
    atts = []
    for k in range(c.n_head):
        S = (Xt @ model.A[k] @ Xt.transpose(1, 2)).transpose(1, 2)  # [b, p, j] = x_j^T A x_p
        a = S.masked_fill(~ok, float("-inf")).softmax(-1)
        out = out + a @ Xt @ model.V[k].T
        atts.append(a[:, c.w - 1 : L - 1])
    return out[:, c.w - 1 : L - 1], torch.stack(atts)


@pytest.mark.parametrize("context", [None, 2])
def test_minimal_matches_literal_definition(context):
    model = MinimalAttention(MinimalConfig(d=6, L=9, w=3, n_head=3, context=context))
    with torch.no_grad():
        model.V.normal_()
    x = torch.randint(0, 6, (4, 9))
    logits, att = model(x, return_attn=True)
    ref, ref_att = naive_minimal(model, x)
    torch.testing.assert_close(logits, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(att, ref_att, rtol=1e-5, atol=1e-6)


def test_minimal_init():
    m = MinimalAttention(MinimalConfig(d=5, L=8, w=2, init_scale=0.3))
    with torch.no_grad():
        assert float(m.V.abs().max()) == 0.0
        assert float(m.A.abs().max()) <= 0.3
        m0 = MinimalAttention(MinimalConfig(d=5, L=8, w=2, init_scale=0.0))
        assert float(m0.A.abs().max()) == 0.0  # u = 0: identical heads


def test_minimal_gradients_flow():
    m = MinimalAttention(MinimalConfig(d=5, L=8, w=2))
    x = torch.randint(0, 5, (3, 8))
    F.cross_entropy(m(x).reshape(-1, 5), x[:, 2:].reshape(-1)).backward()
    assert m.V.grad.abs().sum() > 0  # V = 0 at init, so A gets no gradient at step 0
    assert float(m.A.grad.abs().sum()) == 0.0


@pytest.mark.parametrize("context", [None, 4])
def test_full_model_shapes_and_band(context):
    cfg = FullConfig(d=7, L=10, w=4, n_embd=12, n_head=3, d_ff=8, dropout=0.0, context=context)
    m = FullTransformer(cfg).eval()
    x = torch.randint(0, 7, (2, 10))
    with torch.no_grad():
        logits, att = m(x, return_attn=True)
    assert logits.shape == (2, 6, 7) and att.shape == (3, 2, 6, 10)
    torch.testing.assert_close(att.sum(-1), torch.ones(3, 2, 6))
    for qi, p in enumerate(range(3, 9)):
        assert float(att[:, :, qi, p + 1 :].abs().sum()) == 0.0  # causal
        if context is not None:
            assert float(att[:, :, qi, : max(p - context + 1, 0)].abs().sum()) == 0.0


def test_full_model_defaults_match_table_3():
    cfg = FullConfig()
    assert (cfg.n_embd, cfg.d_ff, cfg.dropout, cfg.n_head, cfg.L) == (255, 64, 0.1, 3, 32)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(init_scale=-1.0), "init_scale"),
        (dict(context=0), "context"),
        (dict(w=30, L=26), "smaller"),
    ],
)
def test_bad_model_configs(kw, match):
    with pytest.raises(ValueError, match=match):
        MinimalConfig(**kw)
    with pytest.raises(TypeError, match="MinimalConfig or FullConfig"):
        build_model({"d": 3})


def test_param_groups_partition():
    m = FullTransformer(FullConfig(d=5, L=8, w=2, n_embd=6, n_head=3, d_ff=4))
    g = param_groups(m, 0.01)
    n = sum(p.numel() for p in m.parameters())
    assert sum(p.numel() for gr in g for p in gr["params"]) == n
    assert all(p.ndim >= 2 for p in g[0]["params"]) and g[1]["weight_decay"] == 0.0


@pytest.mark.parametrize("context", [None, 3])
def test_full_model_equals_pytorch_encoder_layer_with_its_weights(context):
    """The whole one-block model against an independent implementation of the same layout
    (torch.nn.TransformerEncoderLayer, post-LN, ReLU): residuals, norms, band mask, positions."""
    torch.manual_seed(0)
    cfg = FullConfig(d=7, L=10, w=4, n_embd=12, n_head=3, d_ff=8, dropout=0.0, context=context)
    m = FullTransformer(cfg).double().eval()
    ref = torch.nn.TransformerEncoderLayer(12, 3, dim_feedforward=8, dropout=0.0,
                                           activation="relu", batch_first=True,
                                           norm_first=False).double().eval()  # fmt: skip
    b = m.block
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(b.attn.c_attn.weight)
        ref.self_attn.in_proj_bias.copy_(b.attn.c_attn.bias)
        ref.self_attn.out_proj.weight.copy_(b.attn.c_proj.weight)
        ref.self_attn.out_proj.bias.copy_(b.attn.c_proj.bias)
        for dst, src in ((ref.linear1, b.mlp[0]), (ref.linear2, b.mlp[3]), (ref.norm1, b.ln_1),
                         (ref.norm2, b.ln_2)):  # fmt: skip
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
        x = torch.randint(0, 7, (2, 10), generator=torch.Generator().manual_seed(1))
        h = m.wte(x) + m.wpe(torch.arange(10))
        allowed = torch.ones(10, 10, dtype=torch.bool).tril()
        if context is not None:
            allowed &= ~torch.ones(10, 10, dtype=torch.bool).tril(-context)
        mask = torch.zeros(10, 10, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        want = m.lm_head(ref(h, src_mask=mask)[:, cfg.w - 1 : cfg.L - 1])
        torch.testing.assert_close(m(x), want, rtol=1e-10, atol=1e-12)
