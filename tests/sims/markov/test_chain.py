import time

import numpy as np
import pytest

from sims.markov.chain import (
    BatchSampler,
    ChainConfig,
    MarkovChain,
    OnlineStream,
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


def test_sampling_speed_12000_sequences():
    chain = MarkovChain(ChainConfig.hierarchical(w=12), seed=0)
    chain.sample(10, np.random.default_rng(0))  # compile
    t0 = time.perf_counter()
    chain.sample(12000, np.random.default_rng(1))
    assert time.perf_counter() - t0 < 2.0  # ~0.25 s on 2 idle cores; margin for shared load


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
