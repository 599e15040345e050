"""Learning/drop times, phase durations, feature counts and the entropy of times (eq. 11)."""

import numpy as np
import pytest

from sims.linear_attention.measure import (
    entropies,
    feature_counts,
    learning_times,
    loss_drop_times,
    phase_durations,
    time_entropy,
)


def test_time_entropy_values_and_invariances():
    t = np.array([100.0, 300.0, 600.0, 1000.0])
    p = t / t.sum()
    expect = -np.sum(p * np.log(p))  # hand formula of eq. (11)
    assert time_entropy(t) == pytest.approx(expect, rel=1e-14)
    assert time_entropy(7.5 * t) == pytest.approx(expect, rel=1e-14)  # scale-free
    assert time_entropy(t[::-1]) == pytest.approx(expect, rel=1e-14)  # order-free
    assert abs(time_entropy(t + 500.0) - expect) > 0.05  # not shift-free (counted from 0)
    assert time_entropy([5.0, 5.0, 5.0]) == pytest.approx(np.log(3), rel=1e-14)
    assert time_entropy([0.0, 2.0]) == pytest.approx(0.0, abs=1e-15)
    assert np.isnan(time_entropy([1.0, np.nan]))
    with pytest.raises(ValueError, match="`times` must be >= 0"):
        time_entropy([-1.0, 2.0])
    np.testing.assert_allclose(entropies(np.stack([t, 2 * t, t + 500])),
                               [expect, expect, time_entropy(t + 500)], rtol=1e-14)


def test_learning_and_drop_times():
    comp = np.array([[0.0, 0.0], [0.6, 0.1], [1.0, 0.2], [1.0, 0.3]])
    np.testing.assert_array_equal(learning_times(comp, np.array([1.0, 1.0])), [1.0, np.nan])
    np.testing.assert_array_equal(learning_times(comp, np.array([1.0, 0.5]), fraction=0.5),
                                  [1.0, 3.0])
    # midpoints 0.8 and 0.45 (not the levels themselves, nor a neighbour's): first hits 1 and 4
    losses = np.array([1.0, 0.75, 0.62, 0.5, 0.4, 0.2])
    np.testing.assert_array_equal(loss_drop_times(losses, [1.0, 0.6, 0.3]), [1.0, 4.0])
    np.testing.assert_array_equal(loss_drop_times(losses[:4], [1.0, 0.6, 0.3]), [1.0, np.nan])
    with pytest.raises(ValueError, match="`fraction` must be in"):
        learning_times(comp, np.ones(2), fraction=0.0)


def test_phase_durations_and_counts():
    t = np.array([[10.0, 40.0, 45.0, np.nan], [5.0, 6.0, 7.0, 100.0]])
    np.testing.assert_array_equal(phase_durations(t)[1], [5.0, 1.0, 1.0, 93.0])
    np.testing.assert_array_equal(phase_durations(t)[0, :3], [10.0, 30.0, 5.0])
    assert np.isnan(phase_durations(t)[0, 3])
    np.testing.assert_array_equal(feature_counts(t, 41), [2, 3])
    np.testing.assert_array_equal(feature_counts(t, 1000), [3, 4])
