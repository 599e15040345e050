"""Hypothesis properties of sims.sosd.spectral: statements of seed 002 that quantify over all
inputs.

* Lemma A.4 (any update, r = min(m, n)): ΔΣ ≤ (1+√r)||ΔW||_F / min(||W||_*), for every pair.
* Lemma A.1: ||a/||a||_1 − b/||b||_1||_2 ≤ (1+√n)/min(||a||_1, ||b||_1) ||a − b||_2.
* Mirsky (Lemma A.2): ||σ(A) − σ(B)||_2 ≤ ||A − B||_F.
* Σ̂ is invariant to orthogonal rotations and to nonzero scaling; ΔΣ is a metric bounded by √2.

Tolerance: the inequalities are checked with a relative slack of 1e-9, far above the float64
round-off of an SVD of an at most 8 x 8 matrix (~1e-15 relative) and far below any real violation.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sims.sosd.spectral import (
    lemma_a4_bound,
    sd_variation,
    sd_variation_from_sigma,
    singular_distribution,
    singular_values,
)

SLACK = 1e-9
floats = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)
shapes = st.tuples(st.integers(1, 8), st.integers(1, 8))


@st.composite
def matrix_pairs(draw):
    m, n = draw(shapes)
    a = draw(arrays(np.float64, (m, n), elements=floats))
    kind = draw(st.sampled_from(["independent", "small", "scaled"]))
    if kind == "independent":
        b = draw(arrays(np.float64, (m, n), elements=floats))
    elif kind == "small":
        scale = draw(st.floats(1e-8, 1e-1))
        b = a + scale * draw(arrays(np.float64, (m, n), elements=floats))
    else:
        b = draw(st.floats(0.01, 100)) * a
    return a, b


def _nuclear(w):
    return float(np.sum(np.linalg.svd(w, compute_uv=False)))


@given(matrix_pairs())
def test_lemma_a4_for_every_pair(pair):
    a, b = pair
    assume(_nuclear(a) > 1e-6 and _nuclear(b) > 1e-6)
    assert sd_variation(a, b) <= lemma_a4_bound(a, b) * (1 + SLACK) + 1e-15


@given(st.integers(1, 10).flatmap(lambda n: st.tuples(
    arrays(np.float64, n, elements=floats), arrays(np.float64, n, elements=floats))))
def test_lemma_a1_l1_normalization_is_lipschitz(vecs):
    a, b = vecs
    al, bl = np.abs(a).sum(), np.abs(b).sum()
    assume(al > 1e-6 and bl > 1e-6)
    lhs = np.linalg.norm(a / al - b / bl)
    n = a.size
    assert lhs <= (1 + math.sqrt(n)) / min(al, bl) * np.linalg.norm(a - b) * (1 + SLACK) + 1e-15
    # the proof gives the sharper constant with max(α, β) (both one-sided bounds hold)
    assert lhs <= (1 + math.sqrt(n)) / max(al, bl) * np.linalg.norm(a - b) * (1 + SLACK) + 1e-15


@given(matrix_pairs())
def test_mirsky_singular_values_are_1_lipschitz(pair):
    a, b = pair
    lhs = np.linalg.norm(singular_values(a) - singular_values(b))
    assert lhs <= np.linalg.norm(a - b) * (1 + SLACK) + 1e-12


@given(shapes.flatmap(lambda s: arrays(np.float64, s, elements=floats)), st.integers(0, 2**31),
       st.floats(1e-3, 1e3), st.booleans())  # fmt: skip
def test_distribution_is_rotation_and_scale_invariant(w, seed, c, flip):
    assume(_nuclear(w) > 1e-6)
    rng = np.random.default_rng(seed)
    m, n = w.shape
    u, _ = np.linalg.qr(rng.standard_normal((m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    rotated = (-c if flip else c) * (u @ w @ v.T)
    np.testing.assert_allclose(singular_distribution(rotated), singular_distribution(w),
                               atol=1e-10)  # fmt: skip


@given(matrix_pairs())
def test_sd_variation_is_a_bounded_symmetric_distance(pair):
    a, b = pair
    assume(_nuclear(a) > 1e-6 and _nuclear(b) > 1e-6)
    d = sd_variation(a, b)
    assert 0 <= d <= math.sqrt(2) + 1e-12
    assert d == sd_variation(b, a) or abs(d - sd_variation(b, a)) < 1e-12
    assert sd_variation(a, a) == 0.0


@given(st.integers(1, 6).flatmap(lambda n: st.tuples(
    arrays(np.float64, n, elements=st.floats(0, 10)), arrays(np.float64, n,
                                                             elements=st.floats(0, 10)))))
def test_sd_variation_from_sigma_matches_matrices(vecs):
    a, b = vecs
    assume(a.sum() > 1e-6 and b.sum() > 1e-6)
    assert sd_variation_from_sigma(a, b) == sd_variation(np.diag(a), np.diag(b)) or math.isclose(
        sd_variation_from_sigma(a, b), sd_variation(np.diag(a), np.diag(b)), abs_tol=1e-12
    )
