"""Hypothesis property tests for the majorization helpers (Lemma C.2, Lemma C.4)."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from theory import entropy as en

pos = st.floats(min_value=1e-3, max_value=1.0, allow_nan=False)


@given(st.lists(pos, min_size=2, max_size=7), st.data())
def test_lemma_c2_property(raw, data):
    A = sorted(raw, reverse=True)
    tot = sum(A)
    A = [a / tot for a in A]
    w = sorted(data.draw(st.lists(st.floats(0.5, 2.0), min_size=len(A), max_size=len(A))))
    B = en.renormalized_reweighting(A, w)
    assume(all(B[i] >= B[i + 1] for i in range(len(B) - 1)))
    assert en.majorizes(A, B, tol=1e-12)
    assert en.entropy(B) >= en.entropy(A) - 1e-12


@given(st.lists(pos, min_size=2, max_size=7))
def test_uniform_is_majorized_by_everything(raw):
    tot = sum(raw)
    p = [x / tot for x in raw]
    n = len(p)
    assert en.majorizes(p, [1 / n] * n, tol=1e-12)
    assert en.entropy([1 / n] * n) >= en.entropy(p) - 1e-12
