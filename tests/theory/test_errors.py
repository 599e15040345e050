"""Bad inputs to public functions raise ValueError/TypeError naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from theory import attention_model as am
from theory import entropy as en
from theory import merged_kq as mk
from theory import sam_flow as sf
from theory import wishart as wi
from theory.verify import claim


def test_wishart_inputs():
    with pytest.raises(ValueError, match="`d`"):
        wi.symmetric_matrix(0)
    with pytest.raises(TypeError, match="`Sigma`"):
        wi.wishart_second_moment([[1, 0], [0, 1]], 3)
    with pytest.raises(ValueError, match="symmetric"):
        wi.wishart_second_moment(sp.Matrix([[1, 2], [0, 1]]), 3)
    with pytest.raises(ValueError, match="`e`"):
        wi.gaussian_fourth_moment(sp.eye(2), 0, 0, 0, 5)
    with pytest.raises(ValueError, match="`N`"):
        wi.monte_carlo_second_moment(np.eye(2), 0)
    with pytest.raises(ValueError, match="`Sigma`"):
        wi.monte_carlo_second_moment(np.ones(3), 2)


def test_model_inputs():
    with pytest.raises(ValueError, match="`H`"):
        am.make_heads(2, 0)
    with pytest.raises(ValueError, match="`heads`"):
        am.kv_matrix([])
    with pytest.raises(ValueError, match="`N`"):
        am.attn_s_prediction_from_matrices(2, 0, 1)


def test_flow_inputs():
    with pytest.raises(ValueError, match="`which`"):
        sf.check_flow_against_model(sf.sam_flow_full, which="adam")
    with pytest.raises(TypeError, match="`flow_expr`"):
        sf.check_flow_against_model(3, which="gd")
    v = sp.Symbol("v")
    with pytest.raises(ValueError, match="`kept_order`"):
        sf.check_truncation(v**2, v, v, -1)
    with pytest.raises(TypeError, match="`F`"):
        mk.check_implicit_solution("log(s)", sp.Symbol("s"))


def test_entropy_inputs():
    with pytest.raises(ValueError, match="`times`"):
        en.entropy([])
    with pytest.raises(ValueError, match="`times`"):
        en.entropy([1.0, -1.0])
    with pytest.raises(ValueError, match="`x` and `y`"):
        en.majorizes([1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="`eps`"):
        en.learning_times([1.0, 0.5], 0.8, 0.05, 0.1)  # 2ρ/√3 > ε
    with pytest.raises(ValueError, match="`eps`"):
        en.learning_times([1.0], 0.1, 0.5, 0.0)  # ε above u = cλ^{-1/3}
    with pytest.raises(ValueError, match="`flow`"):
        en.learning_times([1.0], 0.8, 0.05, 0.0, flow="rk4")
    with pytest.raises(ValueError, match="`weight_order`"):
        en.check_lemma_c2(weight_order="random")


def test_claim_name_must_be_identifier():
    with pytest.raises(ValueError, match="`name`"):
        claim("not an identifier", "ref", "stmt")
