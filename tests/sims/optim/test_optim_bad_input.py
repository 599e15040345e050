"""Bad input: a clear error naming the argument and the fix, and nothing half-updated."""

import copy
import math

import pytest
import torch

from sims.optim import NonFiniteGradientError, SAMFamily, build_optimizer, partition_params
from sims.optim import torch_sam as ts
from tests.sims.optim.optim_helpers import closure_for, make_data, make_net


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda m: build_optimizer("sam", m, lr=0.1, rho=-0.1), ValueError, r"`rho`.*>= 0"),
        (lambda m: build_optimizer("sam", m, lr=0.1, rho=math.inf), ValueError, "`rho`"),
        (lambda m: build_optimizer("sam", m, lr=0.1, rho="0.1"), TypeError, "`rho`"),
        (
            lambda m: build_optimizer("adam", m, lr=0.1),
            ValueError,
            "unknown optimizer 'adam'.*pfsam",
        ),
        (lambda m: build_optimizer("sam", m, lr=-1.0), ValueError, "`lr`"),
        (
            lambda m: build_optimizer("sam", m, lr=0.1, weight_decay=-0.1),
            ValueError,
            "`weight_decay`",
        ),
        (
            lambda m: build_optimizer("pfsam", m, lr=0.1, precond_norm="both"),
            ValueError,
            "`precond_norm` 'both'.*pre",
        ),
        (
            lambda m: build_optimizer("pfsam", m, lr=0.1, precond_step0="skip"),
            ValueError,
            "`precond_step0`",
        ),
        (lambda m: build_optimizer("psam", m, lr=0.1, base="sgd"), ValueError, "base='adamw'"),
        (lambda m: build_optimizer("sam", m, lr=0.1, base="lion"), ValueError, "`base` 'lion'"),
        (lambda m: build_optimizer("angle_sam", m, lr=0.1), ValueError, "angle_weights"),
        (
            lambda m: build_optimizer("fsam", m, lr=0.1, angle_weights=(1, 1)),
            ValueError,
            "only applies to variant 'angle_sam'",
        ),
        (
            lambda m: build_optimizer("fsam", m, lr=0.1, nonfinite="ignore"),
            ValueError,
            "`nonfinite`",
        ),
        (
            lambda m: build_optimizer("fsam", m, lr=0.1, rho_warmup_steps=-3),
            ValueError,
            "`rho_warmup_steps`",
        ),
        (
            lambda m: build_optimizer("fsam", m, lr=0.1, max_grad_norm=0.0),
            ValueError,
            "`max_grad_norm`",
        ),
        (
            lambda m: build_optimizer("fsam", m, lr=0.1, rhoo=0.1),
            TypeError,
            r"unknown option.*rhoo",
        ),
        (lambda m: build_optimizer("adamw", m, lr=0.1, momentum=0.9), TypeError, "momentum"),
        (
            lambda m: build_optimizer("muon", m, lr=0.1, precond_norm="post"),
            TypeError,
            "precond_norm",
        ),
        (
            lambda m: build_optimizer("adamw", m, lr=0.1, rho=0.1),
            TypeError,
            "only apply to the SAM",
        ),
        (
            lambda m: build_optimizer("muon", m, lr=0.1, base="sgd"),
            TypeError,
            "only apply to the SAM",
        ),
        (
            lambda m: SAMFamily(
                m.parameters(), torch.optim.SGD, 0.1, variant="fsam", precondition=True, lr=0.1
            ),
            ValueError,
            "Adam-type base",
        ),
        (
            lambda m: SAMFamily(m.parameters(), torch.optim.SGD, 0.1, variant="gsam", lr=0.1),
            ValueError,
            "unknown `variant` 'gsam'",
        ),
        (
            lambda m: build_optimizer("sam", "model", lr=0.1),
            TypeError,
            "`model` must be a torch.nn.Module",
        ),
    ],
)
def test_bad_arguments_are_named(call, exc, match):
    with pytest.raises(exc, match=match):
        call(make_net())


def test_model_with_nothing_to_perturb():
    net = make_net()
    for p in net.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        partition_params(net)
    with pytest.raises(ValueError, match="no trainable parameters"):
        build_optimizer("fsam", net, lr=0.1)
    with pytest.raises(ValueError, match="no parameters to perturb"):
        SAMFamily([], torch.optim.SGD, 0.1, lr=0.1)


def test_fsam_closure_without_logits_is_a_type_error_and_changes_nothing():
    net = make_net()
    x, y = make_data()
    opt = build_optimizer("fsam", net, lr=0.1)
    before = copy.deepcopy(net.state_dict())
    with pytest.raises(TypeError, match="needs the logits"):
        opt.step(lambda: torch.nn.functional.cross_entropy(net(x), y))
    with pytest.raises(TypeError, match=r"\(loss, logits\)"):
        opt.step(lambda: {"loss": 1.0})
    for k, v in net.state_dict().items():
        assert torch.equal(before[k], v)


def _nan_closure(net, x, y, when):
    """NaN loss on the given call numbers (1 = pass 1, 2 = pass 2)."""
    calls = {"n": 0}

    def closure():
        calls["n"] += 1
        logits = net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        if calls["n"] in when:
            logits = logits * torch.tensor(float("nan"))
            loss = torch.nn.functional.cross_entropy(logits, y)
        return loss, logits

    return closure


def _snapshot(net, opt):
    return copy.deepcopy(net.state_dict()), copy.deepcopy(opt.state_dict())


def _assert_unchanged(net, opt, snap):
    for k, v in net.state_dict().items():
        assert torch.equal(snap[0][k], v), k
    now = opt.state_dict()
    assert now["sam_steps"] == snap[1]["sam_steps"]
    for i, st in snap[1]["base"]["state"].items():
        for key, val in st.items():
            assert torch.equal(now["base"]["state"][i][key], val)


@pytest.mark.parametrize("name", ["sam", "fsam", "pfsam", "lsam"])
@pytest.mark.parametrize("when", [(1,), (2,)])
def test_nonfinite_raise_leaves_everything_unchanged(name, when):
    net = make_net()
    x, y = make_data()
    opt = build_optimizer(name, net, lr=0.1, rho=0.05)
    opt.step(closure_for(net, x, y))  # build some base state
    snap = _snapshot(net, opt)
    with pytest.raises(NonFiniteGradientError, match="nonfinite='skip'"):
        opt.step(_nan_closure(net, x, y, when))
    _assert_unchanged(net, opt, snap)


def test_nonfinite_skip_warns_counts_and_continues():
    net = make_net()
    x, y = make_data()
    opt = build_optimizer("pfsam", net, lr=0.1, rho=0.05, nonfinite="skip")
    opt.step(closure_for(net, x, y))
    snap = _snapshot(net, opt)
    with pytest.warns(RuntimeWarning, match="Step skipped"):
        opt.step(_nan_closure(net, x, y, when=(2,)))
    _assert_unchanged(net, opt, snap)
    assert opt.skipped_steps == 1 and opt.last_info == {"skipped": True}
    opt.step(closure_for(net, x, y))
    assert opt.sam_steps == 2 and opt.last_info["skipped"] is False


def test_an_exception_inside_pass_two_restores_the_parameters():
    net = make_net()
    x, y = make_data()
    opt = build_optimizer("fsam", net, lr=0.1, rho=0.5)
    snap = copy.deepcopy(net.state_dict())
    calls = {"n": 0}

    def closure():
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        logits = net(x)
        return torch.nn.functional.cross_entropy(logits, y), logits

    with pytest.raises(KeyboardInterrupt):
        opt.step(closure)
    for k, v in net.state_dict().items():
        assert torch.equal(snap[k], v)


def test_kernel_inputs_are_checked():
    g = [torch.ones(3)]
    with pytest.raises(ValueError, match="`mode`"):
        ts.preconditioned_perturbation(g, 0.1, [torch.ones(3)], mode="max")
    with pytest.raises(ValueError, match="`precond_inv` has 2"):
        ts.preconditioned_perturbation(g, 0.1, [torch.ones(3)] * 2)
    with pytest.raises(TypeError, match="`rho`"):
        ts.sam_perturbation(g, True)
