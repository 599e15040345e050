"""partition_params on HF causal LMs, PEFT LoRA models and plain modules; hybrid Muon + AdamW."""

import copy

import pytest
import torch

from sims.optim import MuonAdamW, build_optimizer, partition_params

transformers = pytest.importorskip("transformers")


def _llama(tie=True):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tie,
        max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg)


def test_llama_tied_and_untied():
    for tie in (True, False):
        model = _llama(tie)
        part = partition_params(model)
        names = part.names
        assert names["embeddings"] == ["model.embed_tokens.weight"]
        assert names["head"] == ([] if tie else ["lm_head.weight"])
        assert all(n.endswith(("proj.weight",)) for n in names["hidden"])
        assert len(names["hidden"]) == 2 * 7  # q,k,v,o,gate,up,down per layer
        assert all("norm" in n for n in names["other"])
        assert {id(p) for p in part.decay} | {id(p) for p in part.no_decay} == {
            id(p) for p in model.parameters()
        }


def test_gpt2_conv1d_and_position_embeddings():
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=64, n_positions=32)
    )
    names = partition_params(model).names
    assert sorted(names["embeddings"]) == ["transformer.wpe.weight", "transformer.wte.weight"]
    assert all(
        n.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")) for n in names["hidden"]
    )
    assert all(
        n.endswith(("bias", "ln_1.weight", "ln_2.weight", "ln_f.weight")) for n in names["other"]
    )


def test_peft_lora_only_adapters():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        _llama(), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    )
    part = partition_params(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set(part.names["hidden"]) == trainable and len(trainable) == 2 * 2 * 2
    assert not part.embeddings and not part.head and not part.other
    opt = build_optimizer("muon", model, lr=1e-3)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(trainable)


def test_peft_lora_with_trainable_head_goes_to_adamw():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        _llama(tie=False),
        peft.LoraConfig(r=4, target_modules=["q_proj"], modules_to_save=["lm_head"],
                        task_type="CAUSAL_LM"),
    )  # fmt: skip
    names = partition_params(model).names
    assert names["head"] and all("lm_head" in n for n in names["head"])
    assert all("lora" in n for n in names["hidden"])


def test_muon_hybrid_steps_both_groups_and_uses_muon_on_matrices():
    model = _llama(tie=False)
    opt = build_optimizer("muon", model, lr=1e-2, weight_decay=0.1)
    assert isinstance(opt, MuonAdamW)
    assert [g["muon"] for g in opt.param_groups] == [True, False, False]
    assert opt.param_groups[2]["weight_decay"] == 0.0
    before = copy.deepcopy(model.state_dict())
    ids = torch.randint(0, 64, (2, 10))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    changed = {k for k, v in model.state_dict().items() if not torch.equal(before[k], v)}
    assert changed == set(before)  # every parameter moved
    # a Muon update of a matrix is (near-)orthogonalized momentum: its singular values are
    # O(1)-flat (Newton-Schulz gives ~[0.5, 1.5] spread), unlike the raw gradient's
    w = model.model.layers[0].mlp.up_proj.weight
    st = opt.state[w]
    assert "momentum_buffer" in st and "exp_avg" not in st
    emb = model.model.embed_tokens.weight
    assert "exp_avg" in opt.state[emb]


def test_muon_update_is_orthogonalized():
    torch.manual_seed(0)
    lin = torch.nn.Sequential(torch.nn.Embedding(5, 24), torch.nn.Linear(24, 16, bias=False))
    part = partition_params(lin)
    opt = MuonAdamW(part, lr=1.0, weight_decay=0.0, momentum=0.0, nesterov=False,
                    adjust_lr_fn=None)  # fmt: skip
    w = lin[1].weight
    g = torch.randn(16, 24) * torch.logspace(-2, 1, 24)  # ill-conditioned gradient
    w.grad = g.clone()
    lin[0].weight.grad = torch.zeros_like(lin[0].weight)
    w0 = w.detach().clone()
    opt.step()
    s_upd = torch.linalg.svdvals(w0 - w.detach())
    s_g = torch.linalg.svdvals(g)
    assert float(s_g.max() / s_g.min()) > 50
    assert float(s_upd.max() / s_upd.min()) < 3.0  # Newton-Schulz: singular values in ~[0.5, 1.5]


class _Custom(torch.nn.Module):
    """A custom LM: a bare position table and an untied head, neither named like one."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(16, 8)
        self.pos = torch.nn.Parameter(torch.randn(6, 8))
        self.mix = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 16, bias=False)

    def forward(self, ids):
        return self.out(torch.tanh(self.mix(self.tok(ids) + self.pos[: ids.shape[-1]])))


def test_caller_names_a_position_table_and_an_untied_head():
    torch.manual_seed(0)
    model = _Custom()
    plain = partition_params(model).names
    assert {"pos", "out.weight"} <= set(plain["hidden"])  # unrecognisable: Muon's by default
    named = partition_params(model, embeddings=["pos"], head="out").names
    assert named["hidden"] == ["mix.weight"]
    assert sorted(named["embeddings"]) == ["pos", "tok.weight"] and named["head"] == ["out.weight"]
    same = partition_params(model, embeddings=[model.pos], head=[model.out.weight]).names
    assert same == named
    opt = build_optimizer("muon", model, lr=1e-2, embeddings=["pos"], head=["out"])
    muon = [p for g in opt.param_groups if g["muon"] for p in g["params"]]
    assert len(muon) == 1 and muon[0] is model.mix.weight
    # Muon's momentum buffer only on the hidden matrix; the table gets AdamW's moments
    model(torch.randint(0, 16, (2, 5))).sum().backward()
    opt.step()
    assert "exp_avg" in opt.state[model.pos] and "momentum_buffer" in opt.state[model.mix.weight]
    with pytest.raises(ValueError, match="`embeddings` names 'position'"):
        partition_params(model, embeddings=["position"])
    with pytest.raises(ValueError, match="same parameter"):
        partition_params(model, embeddings=["pos"], head=["pos"])
    with pytest.raises(ValueError, match="not a parameter of `model`"):
        partition_params(model, head=[torch.nn.Parameter(torch.ones(2, 2))])


def test_muon_defaults_are_the_documented_ones():
    """weight decay 0 and match_rms_adamw, unlike torch.optim.Muon (0.1, original scaling)."""
    import inspect

    torch_defaults = inspect.signature(torch.optim.Muon.__init__).parameters
    assert torch_defaults["weight_decay"].default == 0.1
    assert torch_defaults["adjust_lr_fn"].default is None
    ours = inspect.signature(MuonAdamW.__init__).parameters
    assert ours["weight_decay"].default == 0.0
    assert ours["adjust_lr_fn"].default == "match_rms_adamw"
    opt = build_optimizer("muon", _llama(tie=False), lr=1e-3)
    assert opt.muon.defaults["adjust_lr_fn"] == "match_rms_adamw"
    assert all(g["weight_decay"] == 0.0 for g in opt.param_groups)


class _BareTables(torch.nn.Module):
    """Token tables and a head kept as bare ``nn.Parameter``s (no ``nn.Embedding`` module)."""

    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.randn(16, 8))
        self.tok_embed = torch.nn.Parameter(torch.randn(16, 8))
        self.proj = torch.nn.Linear(8, 8, bias=False)
        self.lm_head = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, ids):
        h = torch.tanh(self.proj(self.wte[ids] + self.tok_embed[ids]))
        return h @ self.lm_head.T


def test_bare_wte_and_tok_embed_parameters_go_to_adamw_not_muon():
    torch.manual_seed(0)
    model = _BareTables()
    names = partition_params(model).names
    assert names == {"hidden": ["proj.weight"], "embeddings": ["wte", "tok_embed"],
                     "head": ["lm_head"], "other": []}  # fmt: skip
    opt = build_optimizer("muon", model, lr=1e-2)
    muon = [p for g in opt.param_groups if g["muon"] for p in g["params"]]
    assert len(muon) == 1 and muon[0] is model.proj.weight
    model(torch.randint(0, 16, (2, 5))).sum().backward()
    opt.step()
    for table in (model.wte, model.tok_embed, model.lm_head):  # AdamW's moments, no Muon buffer
        assert "exp_avg" in opt.state[table] and "momentum_buffer" not in opt.state[table]
    assert "momentum_buffer" in opt.state[model.proj.weight]


@pytest.mark.parametrize("shape", [(64, 16), (16, 48)])
def test_match_rms_adamw_gives_an_update_rms_of_about_a_fifth_of_lr(shape):
    """The factor is 0.2 sqrt(max(A, B)); the update's RMS is about 0.2·lr (the docstring).

    One Muon step (no momentum) of a random gradient: the Newton-Schulz output has singular
    values in about [0.7, 1.2], so its RMS is within 30 % of 1/sqrt(max(A, B)).
    """
    torch.manual_seed(0)
    lin = torch.nn.Linear(shape[1], shape[0], bias=False)
    lr = 1e-2
    opt = MuonAdamW(partition_params(lin), lr=lr, momentum=0.0, nesterov=False)
    lin.weight.grad = torch.randn(shape)
    w0 = lin.weight.detach().clone()
    opt.step()
    rms = float((lin.weight.detach() - w0).pow(2).mean().sqrt())
    assert rms == pytest.approx(0.2 * lr, rel=0.3)  # not 0.2 sqrt(max(A, B)) lr (1.6-1.4x lr)


def test_adam_defaults_differ_from_torch_as_documented():
    import inspect

    from sims.optim import factory

    torch_adamw = inspect.signature(torch.optim.AdamW.__init__).parameters
    assert torch_adamw["betas"].default == (0.9, 0.999) and torch_adamw["weight_decay"].default
    model = _BareTables()
    for name in ("adamw", "muon", "sam"):
        opt = build_optimizer(name, model, lr=1e-3)
        adam = {"adamw": opt, "muon": getattr(opt, "adamw", None),
                "sam": getattr(opt, "base_optimizer", None)}[name]  # fmt: skip
        assert all(g["betas"] == (0.9, 0.95) for g in adam.param_groups), name
        assert all(g["weight_decay"] == 0.0 for g in opt.param_groups), name
    for doc in (factory.__doc__, MuonAdamW.__doc__):
        assert "(0.9, 0.999)" in doc and "(0.9, 0.95)" in doc
