"""``sims.optim.SAM`` as a drop-in for davda54/sam: its README loops run unchanged against ours.

davda54/sam's README trains with two loops: the two halves (``loss.backward();
opt.first_step(zero_grad=True)``, then a full forward-backward and ``opt.second_step(
zero_grad=True)``) and ``opt.step(closure)`` with a closure that calls ``backward``. Both are run
here verbatim (written from its README, not copied), with davda54's positional ``adaptive``
(``SAM(params, SGD, 2.0, True, lr=0.1)``) and with a BatchNorm network, against a reference
written out by hand: the network's forward, the running-statistics update (``(1 - m) r + m s``,
the unbiased batch variance, once per step at θ) and SGD with momentum, no ``torch.nn`` module.
"""

import copy
import math

import pytest
import torch

from sims.optim import SAM
from tests.sims.optim.optim_helpers import make_data, make_net

MOMENTUM_BN = 0.3  # BatchNorm's running-average weight (torch's default 0.1; any works)
EPS_BN = 1e-5


def _bn_net(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 6, dtype=torch.float64),
        torch.nn.BatchNorm1d(6, momentum=MOMENTUM_BN, eps=EPS_BN, dtype=torch.float64),
        torch.nn.Tanh(),
        torch.nn.Linear(6, 4, dtype=torch.float64),
    )


def _loss_fn(logits, y):
    return torch.nn.functional.cross_entropy(logits, y)


def _reference(net, x, y, *, rho, lr, momentum, steps, adaptive):
    """SAM/ASAM + SGD(momentum) on the BatchNorm net, written out (no nn module, no sims code).

    Returns the parameters and ``(running_mean, running_var, num_batches_tracked)``.
    """
    p = {n: t.detach().clone() for n, t in net.named_parameters()}
    rm, rv = torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    buf = None

    def forward(q):
        h = x @ q["0.weight"].T + q["0.bias"]
        mu, var = h.mean(0), h.var(0, unbiased=False)
        z = (h - mu) / torch.sqrt(var + EPS_BN) * q["1.weight"] + q["1.bias"]
        return torch.tanh(z) @ q["3.weight"].T + q["3.bias"], mu, h.var(0, unbiased=True)

    def grad_at(q):
        q = {n: t.clone().requires_grad_(True) for n, t in q.items()}
        out, mu, var_u = forward(q)
        g = torch.autograd.grad(_loss_fn(out, y), list(q.values()))
        return dict(zip(q, g, strict=True)), mu.detach(), var_u.detach()

    for _ in range(steps):
        g, mu, var_u = grad_at(p)  # pass 1 at θ: the only running-statistics update
        rm = (1 - MOMENTUM_BN) * rm + MOMENTUM_BN * mu
        rv = (1 - MOMENTUM_BN) * rv + MOMENTUM_BN * var_u
        t = {n: p[n].abs() if adaptive else torch.ones_like(p[n]) for n in p}
        norm = math.sqrt(sum(float(((t[n] * g[n]) ** 2).sum()) for n in p))
        e = {n: rho * t[n] ** 2 * g[n] / norm for n in p}
        g2, _, _ = grad_at({n: p[n] + e[n] for n in p})  # pass 2 at θ + e: statistics untouched
        buf = g2 if buf is None else {n: momentum * buf[n] + g2[n] for n in p}
        p = {n: p[n] - lr * buf[n] for n in p}
    return p, (rm, rv, steps)


def _two_step_loop(model, optimizer, data):
    """davda54/sam README, "Usage": the two halves."""
    for inputs, targets in data:
        loss = _loss_fn(model(inputs), targets)  # first forward-backward pass
        loss.backward()
        optimizer.first_step(zero_grad=True)
        _loss_fn(model(inputs), targets).backward()  # second forward-backward pass
        optimizer.second_step(zero_grad=True)


def _closure_loop(model, optimizer, data):
    """davda54/sam README, the ``step(closure)`` alternative."""
    for inputs, targets in data:

        def closure():
            loss = _loss_fn(model(inputs), targets)  # noqa: B023 (the README's loop)
            loss.backward()
            return loss

        loss = _loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step(closure)
        optimizer.zero_grad()


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("loop", [_two_step_loop, _closure_loop], ids=["two-step", "closure"])
@pytest.mark.parametrize("adaptive", [False, True], ids=["sam", "asam"])
def test_readme_loops_with_batchnorm_and_positional_adaptive_match_the_reference(loop, adaptive):
    x, y = make_data(n=12)
    rho = 2.0 if adaptive else 0.3  # ASAM's radius is ~10x SAM's (davda54's README: 2.0)
    net = _bn_net()
    ref_p, (rm, rv, n) = _reference(_bn_net(), x, y, rho=rho, lr=0.1, momentum=0.9, steps=3,
                                    adaptive=adaptive)  # fmt: skip
    optimizer = SAM(net.parameters(), torch.optim.SGD, rho, adaptive, lr=0.1, momentum=0.9)
    assert optimizer.adaptive is adaptive
    assert all(g["adaptive"] is adaptive and g["rho"] == rho for g in optimizer.param_groups)
    net.train()
    loop(net, optimizer, [(x, y)] * 3)
    for name, q in net.named_parameters():
        _close(q.detach(), ref_p[name])
    bn = net[1]
    assert int(bn.num_batches_tracked) == n  # once per step, not once per pass
    _close(bn.running_mean, rm)  # at θ: the perturbed passes left them alone
    _close(bn.running_var, rv)


def test_every_pass_option_keeps_the_old_behaviour_and_it_differs():
    x, y = make_data(n=12)
    a, b = _bn_net(), _bn_net()
    oa = SAM(a.parameters(), torch.optim.SGD, 0.3, lr=0.1)
    ob = SAM(b.parameters(), torch.optim.SGD, 0.3, lr=0.1, batchnorm_stats="every_pass")
    _two_step_loop(a, oa, [(x, y)] * 2)
    _two_step_loop(b, ob, [(x, y)] * 2)
    assert int(a[1].num_batches_tracked) == 2 and int(b[1].num_batches_tracked) == 4
    assert float((a[1].running_mean - b[1].running_mean).abs().max()) > 1e-6
    with pytest.raises(ValueError, match="`batchnorm_stats`"):
        SAM(a.parameters(), torch.optim.SGD, 0.3, lr=0.1, batchnorm_stats="never")


def test_a_batchnorm_layer_not_trained_by_this_optimizer_keeps_updating():
    """Only layers whose parameters this optimizer holds (or with none) are held still."""
    x, y = make_data(n=12)
    net, other = _bn_net(), _bn_net(seed=1)
    opt = SAM(net.parameters(), torch.optim.SGD, 0.3, lr=0.1)
    _loss_fn(net(x), y).backward()
    opt.first_step(zero_grad=True)
    other(x)  # e.g. a teacher model evaluated between the halves
    _loss_fn(net(x), y).backward()
    opt.second_step(zero_grad=True)
    assert int(other[1].num_batches_tracked) == 1 and int(net[1].num_batches_tracked) == 1
    net(x)  # after second_step the hooks are gone: statistics update again
    assert int(net[1].num_batches_tracked) == 2


def test_group_adaptive_is_read_like_davda54():
    net = make_net()
    opt = SAM(net.parameters(), torch.optim.SGD, 0.5, lr=0.1)
    assert opt.adaptive is False and opt.param_groups[0]["adaptive"] is False
    for g in opt.param_groups:
        g["adaptive"] = True
    assert opt.adaptive is True
    opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(2, dtype=torch.float64))],
                         "adaptive": False})  # fmt: skip
    with pytest.raises(ValueError, match="share one `adaptive`"):
        _ = opt.adaptive


def _davda54_state_dict(opt):
    """What davda54/sam's ``SAM.state_dict()`` holds after a step: ``old_p`` per parameter and
    the param groups (``rho``, ``adaptive`` and the base's hyper-parameters), no base state."""
    params = [p for g in opt.param_groups for p in g["params"]]
    groups, i = [], 0
    for g in opt.param_groups:
        groups.append({**{k: v for k, v in g.items() if k != "params"},
                       "params": list(range(i, i + len(g["params"])))})  # fmt: skip
        i += len(g["params"])
    return {"state": {k: {"old_p": p.detach().clone()} for k, p in enumerate(params)},
            "param_groups": groups}  # fmt: skip


def test_a_davda54_state_dict_is_refused_and_its_base_state_resumes_exactly():
    x, y = make_data(n=12)
    a = make_net()
    oa = SAM(a.parameters(), torch.optim.SGD, 0.3, lr=0.1, momentum=0.9)
    _two_step_loop(a, oa, [(x, y)] * 3)
    b = make_net()
    b.load_state_dict(a.state_dict())
    ob = SAM(b.parameters(), torch.optim.SGD, 0.3, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="base optimizer's state"):
        ob.load_state_dict(_davda54_state_dict(oa))
    assert all(not s for s in ob.base_optimizer.state.values())  # nothing loaded
    # what davda54 users can save (deep-copied, as a file would: torch's load keeps references)
    ob.load_state_dict(copy.deepcopy(oa.base_optimizer.state_dict()))
    assert all("momentum_buffer" in ob.base_optimizer.state[p] for p in b.parameters())
    _two_step_loop(a, oa, [(x, y)] * 2)
    _two_step_loop(b, ob, [(x, y)] * 2)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)  # momentum carried over: exact


@pytest.mark.parametrize("set_to_none", [True, False])
def test_closure_loop_takes_two_passes_per_step_whatever_zero_grad_does(set_to_none):
    """With ``zero_grad(set_to_none=False)`` the gradient tensors are reused in place: the
    fresh-gradient check must see the caller's new backward by the tensor's version."""
    x, y = make_data(n=12)
    net, ref = make_net(), make_net()
    forwards = []
    net.register_forward_hook(lambda *a: forwards.append(1))
    opt = SAM(net.parameters(), torch.optim.SGD, 0.3, lr=0.1, momentum=0.9)
    ropt = SAM(ref.parameters(), torch.optim.SGD, 0.3, lr=0.1, momentum=0.9)
    for _ in range(3):

        def closure():
            loss = _loss_fn(net(x), y)
            loss.backward()
            return loss

        _loss_fn(net(x), y).backward()
        opt.step(closure)
        opt.zero_grad(set_to_none=set_to_none)
        _two_step_loop(ref, ropt, [(x, y)])
    assert len(forwards) == 2 * 3  # davda54: one pass at θ, one at θ + e
    for p, q in zip(net.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["sam", "fsam", "lsam", "psam"])
def test_our_closure_protocol_with_zeroed_but_kept_gradients(name):
    """``zero_grad(set_to_none=False)`` between steps leaves zero tensors in ``p.grad``, changed
    in place since the last step: not a davda54 gradient (it is zero), so the step is ours, with
    the same passes and the same result as after ``set_to_none=True``."""
    from sims.optim import build_optimizer
    from tests.sims.optim.optim_helpers import closure_for

    x, y = make_data(n=12)
    runs = {}
    for set_to_none in (True, False):
        net = make_net()
        forwards = []
        net.register_forward_hook(lambda *a, f=forwards: f.append(1))
        opt = build_optimizer(name, net, lr=0.05, rho=0.3)
        closure_for(net, x, y)()[0].backward()  # e.g. a gradient logged before training
        forwards.clear()
        for _ in range(3):
            opt.zero_grad(set_to_none=set_to_none)
            opt.step(closure_for(net, x, y))
        runs[set_to_none] = (len(forwards), torch.cat([p.detach().flatten()
                                                       for p in net.parameters()]))  # fmt: skip
    assert runs[True][0] == runs[False][0] == 3 * (3 if name == "lsam" else 2)
    torch.testing.assert_close(runs[True][1], runs[False][1], rtol=0, atol=0)
