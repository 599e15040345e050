"""sims.lm corpora and schedules: determinism, Bayes losses against independent computations."""

import math

import numpy as np
import pytest

from sims.lm import CorpusConfig, batch_indices, lr_factor, make_corpus
from sims.lm.data import hmm_parameters, hmm_predictive_nll, zipf_weights


def test_corpora_are_deterministic_in_their_seed():
    for kind in ("hmm", "zipf"):
        cfg = CorpusConfig(kind=kind, vocab_size=20, seq_len=10, n_train=50, n_val=10, seed=3)
        a, b = make_corpus(cfg), make_corpus(cfg)
        assert np.array_equal(a.train, b.train) and np.array_equal(a.val, b.val)
        c = make_corpus(CorpusConfig(**{**cfg.__dict__, "seed": 4}))
        assert not np.array_equal(a.train, c.train)
        assert a.train.min() >= 0 and a.train.max() < 20


def test_batch_order_is_a_function_of_seed_and_step_and_covers_each_epoch():
    n, B = 40, 8
    epoch0 = np.concatenate([batch_indices(n, B, seed=1, step=s) for s in range(5)])
    assert sorted(epoch0) == list(range(n))  # every sequence once per epoch
    epoch1 = np.concatenate([batch_indices(n, B, seed=1, step=s) for s in range(5, 10)])
    assert sorted(epoch1) == list(range(n)) and not np.array_equal(epoch0, epoch1)
    assert np.array_equal(batch_indices(n, B, seed=1, step=7), batch_indices(n, B, seed=1, step=7))
    assert not np.array_equal(
        batch_indices(n, B, seed=2, step=0), batch_indices(n, B, seed=1, step=0)
    )
    with pytest.raises(ValueError, match="`batch_size`=50"):
        batch_indices(n, 50, seed=0, step=0)


def test_zipf_chain_bayes_loss_matches_its_entropy_rate():
    cfg = CorpusConfig(kind="zipf", vocab_size=12, seq_len=64, n_train=8, n_val=4000,
                       zipf_exponent=1.2)  # fmt: skip
    c = make_corpus(cfg)
    # every successor distribution is a permuted Zipf: each has the entropy of zipf_weights
    w = zipf_weights(12, 1.2)
    h = float(-(w * np.log(w)).sum())
    # the empirical NLL under the true chain estimates it; 4000·64 tokens: stderr ~ 0.003
    assert c.bayes_loss == pytest.approx(h, abs=0.015)


def _brute_force_nll(seqs, A, B, init):
    """−(1/nT) Σ log p(x_1..x_T | x_0) by summing the joint over every state path."""
    import itertools

    K = A.shape[0]

    def joint(seq):
        tot = 0.0
        for path in itertools.product(range(K), repeat=len(seq)):
            p = init[path[0]] * B[path[0], seq[0]]
            for t in range(1, len(seq)):
                p *= A[path[t - 1], path[t]] * B[path[t], seq[t]]
            tot += p
        return tot

    nll = sum(-(math.log(joint(s)) - math.log(joint(s[:1]))) for s in seqs)
    return nll / (len(seqs) * (seqs.shape[1] - 1))


def test_hmm_forward_algorithm_against_brute_force_enumeration():
    """A non-degenerate HMM: distinct emission rows (else the likelihood ignores the
    transitions), an asymmetric A (else A and Aᵀ agree) and a non-uniform start."""
    rng = np.random.default_rng(4)
    A = rng.dirichlet(np.ones(3), size=3)
    B = rng.dirichlet(np.ones(4) * 0.7, size=3)
    init = np.array([0.5, 0.3, 0.2])
    assert np.abs(A - A.T).max() > 0.2 and np.abs(B[0] - B[1]).max() > 0.1  # the guards
    seqs = rng.integers(0, 4, (5, 5))
    want = _brute_force_nll(seqs, A, B, init)
    assert hmm_predictive_nll(seqs, A, B, init) == pytest.approx(want, rel=1e-12)
    # each ingredient matters here: a transposed A or a uniform start change the value
    assert abs(_brute_force_nll(seqs, A.T, B, init) / want - 1) > 1e-3
    assert abs(hmm_predictive_nll(seqs, A, B) / want - 1) > 1e-4


def test_hmm_corpus_bayes_loss_uses_its_own_parameters_and_samples_from_them():
    # seed 7: distinct emission rows and an asymmetric A (seed 5, used before, had identical
    # rows, so the likelihood did not depend on the transitions at all)
    cfg = CorpusConfig(kind="hmm", vocab_size=3, seq_len=4, n_train=2, n_val=3, n_states=2,
                       stickiness=0.5, zipf_exponent=1.0, seed=7)  # fmt: skip
    c = make_corpus(cfg)
    A, B = hmm_parameters(cfg)
    assert np.abs(B[0] - B[1]).max() > 0.3 and np.abs(A - A.T).max() > 0.2
    want = _brute_force_nll(c.val, A, B, np.full(2, 0.5))
    assert c.bayes_loss == pytest.approx(want, rel=1e-10)
    # the samples follow (A, B), not (Aᵀ, B): on held-out sequences the true model's NLL is lower
    big = make_corpus(CorpusConfig(kind="hmm", vocab_size=8, seq_len=32, n_train=2, n_val=3000,
                                   n_states=4, stickiness=0.3, zipf_exponent=1.5, seed=6))
    A, B = hmm_parameters(big.config)
    assert np.abs(A - A.T).max() > 0.1
    gap = hmm_predictive_nll(big.val, A.T, B) - hmm_predictive_nll(big.val, A, B)
    assert big.bayes_loss == pytest.approx(hmm_predictive_nll(big.val, A, B), rel=1e-14)
    assert gap > 0.005  # ~10 standard errors at 3000 × 32 tokens


def test_text_corpus_bytes_and_chars(tmp_path):
    text = "the quick brown fox jumps over the lazy dog. " * 40
    f = tmp_path / "t.txt"
    f.write_text(text)
    b = make_corpus(CorpusConfig(kind="text", path=str(f), seq_len=16, tokenizer="byte"))
    assert b.vocab_size == 256 and bytes(b.train[0].astype(np.uint8)) == text[:17].encode()
    c = make_corpus(CorpusConfig(kind="text", path=str(f), seq_len=16, tokenizer="char"))
    assert c.vocab_size == len(set(text)) and "".join(c.chars[i] for i in c.train[0]) == text[:17]
    assert math.isnan(c.bayes_loss)
    with pytest.raises(ValueError, match="too short"):
        make_corpus(CorpusConfig(kind="text", path=str(f), seq_len=1000))
    with pytest.raises(ValueError, match="not a readable file"):
        make_corpus(CorpusConfig(kind="text", path=str(tmp_path / "none.txt")))
    with pytest.raises(ValueError, match="needs `path`"):
        CorpusConfig(kind="text")


@pytest.mark.parametrize(
    "kind, kw, expect",
    [
        ("constant", {}, {0: 1.0, 99: 1.0}),
        ("cosine", {}, {0: 1.0, 50: 0.5, 100: 0.0}),
        ("cosine", {"warmup_steps": 10, "min_factor": 0.1}, {0: 0.1, 9: 1.0, 10: 1.0, 55: 0.55}),
        ("step", {"step_fractions": (0.5, 0.8), "step_factor": 0.5}, {49: 1.0, 50: 0.5, 80: 0.25}),
        ("wsd", {"decay_fraction": 0.2}, {0: 1.0, 79: 1.0, 85: 0.75, 100: 0.0}),
        ("wsd", {"decay_fraction": 0.5, "min_factor": 0.2, "warmup_steps": 5}, {2: 0.6, 75: 0.6}),
    ],
)
def test_schedule_values(kind, kw, expect):
    for step, value in expect.items():
        assert lr_factor(step, 100, kind, **kw) == pytest.approx(value, abs=1e-12), step
