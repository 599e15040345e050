"""Entropy, majorization (Def. C.1), Lemma C.2 and Schur-concavity (Lemma C.4) as properties."""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sims.entropy import (
    lorenz_curve,
    majorization,
    majorizes,
    normalize,
    renormalized_reweighting,
    shannon_entropy,
)

positive_vectors = st.integers(2, 8).flatmap(
    lambda n: arrays(float, n, elements=st.floats(1e-3, 1e3))
)


def test_entropy_known_values():
    assert shannon_entropy([2, 2, 2, 2]) == pytest.approx(np.log(4), rel=1e-15)
    assert shannon_entropy([0, 5, 0]) == 0.0
    assert shannon_entropy([1, 3]) == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))


@given(positive_vectors, st.floats(1e-3, 1e3), st.randoms())
def test_entropy_scale_and_permutation_invariant(x, scale, rnd):
    perm = list(range(len(x)))
    rnd.shuffle(perm)
    h = shannon_entropy(x)
    assert shannon_entropy(scale * x) == pytest.approx(h, abs=1e-12)
    assert shannon_entropy(x[perm]) == pytest.approx(h, abs=1e-12)
    assert -1e-12 <= h <= np.log(len(x)) + 1e-12


def test_majorization_margins_example():
    m = majorization([0.6, 0.3, 0.1], [0.4, 0.35, 0.25])
    assert m.holds and m.strict
    np.testing.assert_allclose(m.margins, [0.2, 0.15], atol=1e-15)
    assert not majorizes([0.4, 0.35, 0.25], [0.6, 0.3, 0.1])
    assert not majorization([1, 0], [0.5, 0.4]).holds  # unequal totals


@given(positive_vectors)
def test_everything_majorizes_uniform_and_is_majorized_by_one_hot(x):
    p = normalize(x)
    n = len(p)
    assert majorizes(p, np.full(n, 1 / n))
    assert majorizes(np.eye(n)[0], p)
    assert majorizes(p, p[::-1])  # permutations majorize each other


def _random_doubly_stochastic(n, weights):
    perms = list(itertools.permutations(range(n)))[: len(weights)]
    w = np.asarray(weights[: len(perms)]) / np.sum(weights[: len(perms)])
    return sum(wi * np.eye(n)[list(pi)] for wi, pi in zip(w, perms, strict=True))


@given(
    st.integers(2, 5).flatmap(
        lambda n: st.tuples(
            arrays(float, n, elements=st.floats(1e-3, 1.0)),
            st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6),
        )
    )
)
def test_schur_concavity_of_entropy(args):
    """Lemma C.4: q = T p, T doubly stochastic ⇒ p ≻ q ⇒ H(q) ≥ H(p) (Hardy–Littlewood–Pólya)."""
    x, weights = args
    p = normalize(x)
    q = _random_doubly_stochastic(len(p), weights) @ p
    assert majorizes(p, q, atol=1e-12)
    assert shannon_entropy(q) >= shannon_entropy(p) - 1e-12


@given(positive_vectors, st.floats(0.01, 0.49))
def test_robin_hood_transfer_strictly_increases_entropy(x, frac):
    """Strict Schur-concavity: moving mass from a larger to a smaller entry raises entropy."""
    p = np.sort(normalize(x))[::-1]
    assume(p[0] - p[-1] > 1e-6)
    q = p.copy()
    delta = frac * (p[0] - p[-1])
    q[0] -= delta
    q[-1] += delta
    assert majorization(p, q).strict
    assert shannon_entropy(q) > shannon_entropy(p)


@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(
            arrays(float, n, elements=st.floats(1e-3, 1.0)),
            arrays(float, n, elements=st.floats(0.1, 10.0)),
        )
    )
)
def test_lemma_c2_increasing_weight_renormalization_is_majorized(args):
    """Lemma C.2: A sorted ↓, w sorted ↑, B = A∘w/⟨A,w⟩ sorted ↓ ⇒ A ≻ B (margins ≥ 0)."""
    a, w = args
    A = np.sort(normalize(a))[::-1]
    W = np.sort(w)
    B = renormalized_reweighting(A, W)
    assume(np.all(np.diff(B) <= 0))
    m = majorization(A, B, atol=1e-12)
    assert m.holds
    # the proof's identity: β_k = α_k m_k / m_n ≤ α_k with m_k the running weighted mean
    alpha = np.cumsum(A)
    mk = np.cumsum(A * W) / alpha
    np.testing.assert_allclose(np.cumsum(B), alpha * mk / mk[-1], rtol=1e-12)
    assert np.all(np.diff(mk) >= -1e-12)


def test_lemma_c2_needs_increasing_weights():
    """The lemma can fail with decreasing weights: then B is more peaked (B ≻ A)."""
    A = np.array([0.5, 0.3, 0.2])
    B = renormalized_reweighting(A, [3.0, 2.0, 1.0])
    assert not majorizes(A, B) and majorizes(B, A)


@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(*[arrays(float, n, elements=st.floats(1e-3, 1e3))] * 2)
    )
)
def test_lorenz_dominance_iff_majorization(xy):
    x, y = xy
    fx, lx = lorenz_curve(x)
    _, ly = lorenz_curve(y)
    assert lx[0] == 0 and lx[-1] == pytest.approx(1.0)
    assert np.all(np.diff(lx, 2) <= 1e-12)  # concave: largest shares first
    assert bool(np.all(lx >= ly - 1e-12)) == majorizes(normalize(x), normalize(y), atol=1e-12)
    np.testing.assert_allclose(fx, np.arange(len(x) + 1) / len(x), rtol=1e-15)


def test_lorenz_curve_by_hand():
    frac, cum = lorenz_curve([1.0, 3.0, 0.0, 4.0])  # shares 0.5, 0.375, 0.125, 0
    np.testing.assert_allclose(frac, [0, 0.25, 0.5, 0.75, 1.0], rtol=1e-15)
    np.testing.assert_allclose(cum, [0, 0.5, 0.875, 1.0, 1.0], rtol=1e-15)


@pytest.mark.parametrize(
    "call,err,match",
    [
        (lambda: shannon_entropy([]), ValueError, "non-empty 1-D"),
        (lambda: shannon_entropy([1, -1]), ValueError, "non-negative"),
        (lambda: shannon_entropy([0, 0]), ValueError, "positive sum"),
        (lambda: shannon_entropy([1, np.inf]), ValueError, "never learned"),
        (lambda: majorization([1, 2], [1, 2, 3]), ValueError, "equal length"),
        (lambda: renormalized_reweighting([1, 2], [1, 0]), ValueError, "`w` must be positive"),
    ],
)
def test_bad_input(call, err, match):
    with pytest.raises(err, match=match):
        call()
