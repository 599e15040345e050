"""The trace algebra behind the symbolic-dimension proofs: soundness against explicit matrices,
and the identities it must (and must not) recognise."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from theory.trace_algebra import Algebra, isserlis_from_mgf, isserlis_pairings


@pytest.fixture
def alg():
    a = Algebra()
    letters = dict(
        A=a.letter("A", "d", "d"), B=a.letter("B", "d", "d"),
        S=a.letter("S", "d", "d", symmetric=True), k=a.letter("k", "d", "1"),
        q=a.letter("q", "d", "1"), U=a.letter("U", "H", "d"), w=a.letter("w", "H", "1"),
    )  # fmt: skip
    return a, letters


def _values(d=4, H=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((d, d))
    return {"A": rng.standard_normal((d, d)), "B": rng.standard_normal((d, d)), "S": X @ X.T,
            "k": rng.standard_normal(d), "q": rng.standard_normal(d),
            "U": rng.standard_normal((H, d)), "w": rng.standard_normal(H)}, {"d": d, "H": H}


# pairs (left, right, equal?) built from the fixture letters
CASES = [
    (lambda L: (L["A"] * L["B"]).trace(), lambda L: (L["B"] * L["A"]).trace(), True),
    (lambda L: (L["A"] * L["B"]).trace(), lambda L: (L["B"].T * L["A"].T).trace(), True),
    (lambda L: (L["A"] * L["B"]).trace(), lambda L: (L["A"] * L["B"].T).trace(), False),
    (lambda L: L["k"].T * L["A"] * L["q"], lambda L: L["q"].T * L["A"].T * L["k"], True),
    (lambda L: L["k"].T * L["A"] * L["q"], lambda L: L["q"].T * L["A"] * L["k"], False),
    (lambda L: (L["k"] * L["q"].T * L["A"]).trace(), lambda L: L["q"].T * L["A"] * L["k"], True),
    (lambda L: L["S"] * L["A"], lambda L: (L["A"].T * L["S"]).T, True),
    (lambda L: L["S"] * L["A"], lambda L: L["A"] * L["S"], False),
    (lambda L: L["U"] * L["A"] * L["U"].T, lambda L: (L["U"] * L["A"].T * L["U"].T).T, True),
    (lambda L: (L["w"].T * L["U"] * L["k"]) * L["A"], lambda L: L["A"] * (L["k"].T * L["U"].T
                                                                        * L["w"]), True),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_canonical_form_agrees_with_explicit_matrices(alg, i):
    a, L = alg
    left, right, equal = CASES[i]
    lhs, rhs = left(L), right(L)
    assert a.equal(lhs, rhs) is equal
    vals, dims = _values()
    same = np.allclose(lhs.evaluate(vals, dims), rhs.evaluate(vals, dims))
    assert same is equal  # the algebra never claims an equality that numbers refute


def test_identity_on_either_side_and_its_trace(alg):
    a, L = alg
    I = a.eye("d")  # noqa: E741 - the identity matrix
    assert a.equal(L["S"] * I, L["S"]) and a.equal(I * L["S"], L["S"])
    assert a.equal(I * L["A"] * I, L["A"])
    tr = a.normal_form(I.trace())
    assert tr == {((), ()): a.dim("d")}
    assert a.equal((L["S"] * I).trace() * I, L["S"].trace() * I)


def test_derivative_is_exact(alg):
    a, L = alg
    D = a.letter("D", "d", "d")
    f = (L["A"] * L["B"] * L["A"]).trace()
    got = f.diff("A", D)
    want = (D * L["B"] * L["A"]).trace() + (L["A"] * L["B"] * D).trace()
    assert a.equal(got, want)
    vals, dims = _values()
    vals["D"] = np.random.default_rng(5).standard_normal((4, 4))
    eps = 1e-6
    plus = dict(vals, A=vals["A"] + eps * vals["D"])
    minus = dict(vals, A=vals["A"] - eps * vals["D"])
    fd = (f.evaluate(plus, dims) - f.evaluate(minus, dims)) / (2 * eps)
    assert np.allclose(fd, got.evaluate(vals, dims), rtol=1e-6)


def test_isserlis_is_derived_from_the_mgf():
    for order in (2, 4):
        derived, pairings = isserlis_from_mgf(order)
        assert sp.expand(derived - pairings) == 0
    derived, _ = isserlis_from_mgf(3)
    assert derived == 0  # odd moments vanish
    assert len(isserlis_pairings(list(range(6)))) == 15  # (6-1)!! pairings


def test_gaussian_fourth_moment_matrix_form(alg):
    a, L = alg
    x = a.letter("x", "d", "1")
    e = (x * x.T * L["A"] * x * x.T).expect_gaussian("x", L["S"])
    S, A = L["S"], L["A"]
    want = S * A * S + S * A.T * S + (A * S).trace() * S
    assert a.equal(e, want)
    # and the coefficient matters: a wrong factor is not accepted
    assert not a.equal(e, 2 * L["S"] * L["A"] * L["S"] + (L["A"] * L["S"]).trace() * L["S"])


def test_sample_covariance_moments_against_monte_carlo(alg):
    a, L = alg
    Sh = a.letter("Sh", "d", "d", symmetric=True)
    N = sp.Symbol("N", positive=True)
    e = (Sh * L["A"] * Sh).expect_sample_cov("Sh", "x", L["S"], N)
    vals, dims = _values(d=3)
    exact = e.evaluate(vals, dims, coeffs={N: 5})
    rng = np.random.default_rng(1)
    C = np.linalg.cholesky(vals["S"])
    xs = rng.standard_normal((100_000, 5, 3)) @ C.T  # (n, N, d)
    Shat = np.einsum("nki,nkj->nij", xs, xs) / 5  # (n, d, d)
    samples = Shat @ vals["A"] @ Shat
    mean, se = samples.mean(0), samples.std(0) / np.sqrt(len(samples))
    assert np.max(np.abs(mean - exact) / se) < 5  # within 5 standard errors, every entry


def test_shape_errors(alg):
    a, L = alg
    with pytest.raises(ValueError, match="multiply"):
        _ = L["U"] * L["U"]
    with pytest.raises(ValueError, match="trace"):
        L["U"].trace()
    with pytest.raises(ValueError, match="add"):
        _ = L["A"] + L["U"]
    with pytest.raises(ValueError, match="already declared"):
        a.letter("A", "d", "H")
    with pytest.raises(ValueError, match="symmetric"):
        a.letter("Z", "d", "H", symmetric=True)
    with pytest.raises(ValueError, match="at most 3"):
        Sh = a.letter("Sh", "d", "d", symmetric=True)
        (Sh * Sh * Sh * Sh).expect_sample_cov("Sh", "x", L["S"], 5)
