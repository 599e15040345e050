import itertools

import numpy as np
import pytest

from sims.markov.chain import (
    BatchSampler,
    ChainConfig,
    MarkovChain,
    OnlineStream,
    best_restricted_log_probs,
    haar_orthogonal,
    kl_divergence,
    make_dataset,
)


def test_hierarchical_matches_tables_1_and_4():
    full = ChainConfig.hierarchical(w=12, h=3, m=1.7, b0=10.0)
    assert full.lags == ((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12))
    np.testing.assert_allclose(full.scales, (28.9, 17.0, 10.0))
    assert (full.L, full.d, full.T) == (32, 50, 20)
    mini = ChainConfig.hierarchical(w=6)
    assert mini.lags == ((1, 2), (3, 4), (5, 6)) and mini.L == 26


def test_reversed_order_is_a_config():
    cfg = ChainConfig.reversed_order()
    assert cfg.w == 14
    assert cfg.lags[0] == (13, 14) and cfg.lags[2] == tuple(range(1, 9))
    assert cfg.scales[0] > cfg.scales[1] > cfg.scales[2]


@pytest.mark.parametrize(
    "groups, w, match",
    [
        ((((1, 2), 1.0), ((2, 3), 1.0)), None, "overlap"),
        ((((1, 2), 1.0), ((3, 9), 1.0)), 6, "do not fit in the window"),
        ((((1, 2), 0.0),), None, "positive"),
        ((((1, 2), -1.0),), None, "positive"),
        ((((0, 1), 1.0),), None, "1-based"),
        ((), None, "non-empty"),
    ],
)
def test_bad_groups(groups, w, match):
    with pytest.raises(ValueError, match=match):
        ChainConfig(groups=groups, w=w)


def test_haar_orthogonal():
    O = haar_orthogonal(7, np.random.default_rng(0))
    np.testing.assert_allclose(O.T @ O, np.eye(7), atol=1e-12)


def test_logits_follow_eq1_by_hand():
    cfg = ChainConfig(groups=(((1,), 2.0), ((2, 3), 1.0)), d=4, T=2)
    chain = MarkovChain(cfg, seed=3)
    x = np.array([[0, 1, 2, 3, 0]])  # w = 3: seeds x[0:3], targets x[3], x[4]
    z = chain.logits(x)
    A1, A2 = chain.A
    # target x[3]: lag1 = x[2]=2, lags 2,3 = x[1]=1, x[0]=0
    expect = A1[:, 2] + 0.5 * (A2[:, 1] + A2[:, 0])
    np.testing.assert_allclose(z[0, 0], expect)
    np.testing.assert_allclose(chain.logits(x, upto=1)[0, 1], A1[:, 3])


def test_samples_follow_the_conditional():
    cfg = ChainConfig.hierarchical(w=4, h=2, m=1.5, b0=2.0, d=5, T=10)
    chain = MarkovChain(cfg, seed=0)
    x = chain.sample(4000, np.random.default_rng(1))
    assert x.min() >= 0 and x.max() < 5
    lp = chain.log_probs(x)
    nll = -np.take_along_axis(lp, x[:, cfg.w :, None], -1).mean()
    ent = -(np.exp(lp) * lp).sum(-1).mean()
    assert abs(nll - ent) < 0.03  # sampling from the right conditional: E[-log p(x)] = H


def test_restricted_truth_kl_is_zero_for_itself_and_positive_otherwise():
    chain = MarkovChain(ChainConfig.hierarchical(w=6, d=10, T=4), seed=0)
    x = chain.sample(50, np.random.default_rng(0))
    full = chain.log_probs(x)
    assert np.allclose(kl_divergence(full, full), 0)
    assert kl_divergence(full, chain.log_probs(x, upto=1)).mean() > 0.1
    with pytest.raises(ValueError, match="upto"):
        chain.logits(x, upto=4)


def test_determinism_and_streams():
    cfg = ChainConfig.hierarchical(w=6, d=10, T=4)
    a = make_dataset(MarkovChain(cfg, seed=1), 20, 10)
    b = make_dataset(MarkovChain(cfg, seed=1), 20, 10)
    np.testing.assert_array_equal(a.train, b.train)
    assert not np.array_equal(a.train[:10], a.test)


def test_batch_sampler_epochs_and_errors():
    s = BatchSampler(10, 5, np.random.default_rng(0))
    first = np.concatenate([next(s), next(s)])
    assert sorted(first.tolist()) == list(range(10))  # one epoch = each once
    with pytest.raises(ValueError, match="larger than the dataset"):
        BatchSampler(4, 5, np.random.default_rng(0))
    up = BatchSampler(3, 2, np.random.default_rng(0), index=np.array([0, 1, 2, 2]))
    assert sorted(np.concatenate([next(up), next(up)]).tolist()) == [0, 1, 2, 2]


def test_online_stream_fresh_batches():
    chain = MarkovChain(ChainConfig.hierarchical(w=6, d=10, T=4), seed=0)
    s = OnlineStream(chain, 8, np.random.default_rng(0))
    a, b = next(s), next(s)
    assert a.shape == (8, 10) and not np.array_equal(a, b)


# ----------------------------------------------------------------------------- best predictors
def _softmax(z):
    p = np.exp(z - z.max())
    return p / p.sum()


def test_best_predictor_first_token_is_the_uniform_average():
    """At the first scored token every lag is an i.i.d. uniform seed: average over the unseen."""
    cfg = ChainConfig.hierarchical(w=4, h=2, m=1.7, b0=6.0, d=4, T=3)
    ch = MarkovChain(cfg, seed=0)
    x = ch.sample(6, np.random.default_rng(1))
    got = np.exp(best_restricted_log_probs(ch, x, 1, method="exact"))[:, 0]
    A1, A2 = ch.A
    for n in range(len(x)):
        s1, s2 = x[n, 3], x[n, 2]  # lags 1, 2 (group 1) of the target x[n, 4]
        ps = [_softmax(0.5 * (A1[:, s1] + A1[:, s2] + A2[:, u3] + A2[:, u4]))
              for u3, u4 in itertools.product(range(4), repeat=2)]  # fmt: skip
        np.testing.assert_allclose(got[n], np.mean(ps, 0), atol=1e-12)


def _brute_force_best(ch, upto):
    """P(x_t | seen lags) by summing the probability of every sequence (tiny chains only)."""
    cfg = ch.config
    d, w, T, L = cfg.d, cfg.w, cfg.T, cfg.L
    seen = sorted(lag for lags in cfg.lags[:upto] for lag in lags)
    seqs = np.array(list(itertools.product(range(d), repeat=L)))
    lp = ch.log_probs(seqs)  # (n, T, d)
    logp = -w * np.log(d) + np.take_along_axis(lp, seqs[:, w:, None], -1)[..., 0].sum(1)
    prob = np.exp(logp)
    out = {}
    for t in range(T):
        for key in itertools.product(range(d), repeat=len(seen)):
            mask = np.all([seqs[:, w + t - lag] == k for lag, k in zip(seen, key, strict=True)],
                          axis=0)  # fmt: skip
            joint = np.bincount(seqs[mask, w + t], weights=prob[mask], minlength=d)
            out[t, key] = joint / joint.sum()
    return out, seen


@pytest.mark.parametrize("upto", [1, 2])
def test_best_predictor_exact_matches_brute_force(upto):
    cfg = ChainConfig(groups=(((1,), 3.0), ((2,), 2.0), ((3,), 1.5)), d=3, T=3)
    ch = MarkovChain(cfg, seed=2)
    ref, seen = _brute_force_best(ch, upto)
    x = ch.sample(30, np.random.default_rng(0))
    got = np.exp(best_restricted_log_probs(ch, x, upto, method="exact"))
    for n in range(len(x)):
        for t in range(cfg.T):
            key = tuple(x[n, cfg.w + t - lag] for lag in seen)
            np.testing.assert_allclose(got[n, t], ref[t, key], atol=1e-12)


@pytest.mark.parametrize("upto", [1, 2])
def test_best_predictor_monte_carlo_matches_exact(upto):
    cfg = ChainConfig.hierarchical(w=6, h=3, m=1.7, b0=6.0, d=3, T=4)
    ch = MarkovChain(cfg, seed=1)
    x = ch.sample(8, np.random.default_rng(2))
    exact = np.exp(best_restricted_log_probs(ch, x, upto, method="exact"))
    mc = np.exp(best_restricted_log_probs(ch, x, upto, method="monte-carlo", n_particles=8000))
    # self-normalised importance sampling: sd ~ sqrt(p(1-p)/ESS) <= 0.5/sqrt(ESS); the evidence
    # is 2 or 4 tokens over d = 3, so ESS >~ N/10 = 800: sd <~ 0.018, and 0.06 is > 3 sd
    assert np.abs(mc - exact).max() < 0.06
    assert np.abs(mc - exact).mean() < 0.01


def test_best_predictor_numpy_fallback_matches_exact():
    from sims.markov.chain import _best_monte_carlo

    cfg = ChainConfig.hierarchical(w=4, h=2, m=1.7, b0=6.0, d=3, T=3)
    ch = MarkovChain(cfg, seed=1)
    x = ch.sample(5, np.random.default_rng(2))
    exact = np.exp(best_restricted_log_probs(ch, x, 1, method="exact"))
    mc = np.exp(_best_monte_carlo(ch, x, 1, 6000, np.random.default_rng(0)))
    assert np.abs(mc - exact).max() < 0.06 and np.abs(mc - exact).mean() < 0.01


def test_best_predictor_all_groups_is_the_truth_and_floors_are_positive():
    cfg = ChainConfig.hierarchical(w=6, h=3, m=1.7, b0=10.0, d=4, T=5)
    ch = MarkovChain(cfg, seed=0)
    x = ch.sample(40, np.random.default_rng(0))
    np.testing.assert_array_equal(best_restricted_log_probs(ch, x, 3), ch.log_probs(x))
    for i in (1, 2):
        best = best_restricted_log_probs(ch, x, i)
        floor = kl_divergence(ch.log_probs(x, upto=i), best).mean()
        assert floor > 0.01  # Eq. (3)'s restricted truth is not the best predictor
        np.testing.assert_allclose(np.exp(best).sum(-1), 1.0, atol=1e-12)


def test_best_predictor_bad_input():
    ch = MarkovChain(ChainConfig.hierarchical(w=6, d=10, T=4), seed=0)
    x = ch.sample(3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="upto"):
        best_restricted_log_probs(ch, x, 0)
    with pytest.raises(ValueError, match="method"):
        best_restricted_log_probs(ch, x, 1, method="magic")
    with pytest.raises(ValueError, match="max_states"):
        best_restricted_log_probs(ch, x, 1, method="exact", max_states=100)
    with pytest.raises(ValueError, match="shape"):
        best_restricted_log_probs(ch, x[:, :5], 1)
    with pytest.raises(ValueError, match="n_particles"):
        best_restricted_log_probs(ch, x, 1, method="monte-carlo", n_particles=0)
