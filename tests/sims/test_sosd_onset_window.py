"""The SoSD onset's centred rolling median at windows small enough that an off-by-one shows.

``test_spectral.py`` checks the detectors on smooth planted curves with 15-21-record windows,
where a window one record too short or shifted by one changes nothing measurable. Here the
window is 3 or 5 records and every expected value is worked out by hand in the comments: the
smoothed values of short hand-written series, the onset record of ``detect_onset`` (floor
method) and the restructuring peaks of ``peak_times``.
"""

import math

import numpy as np
import pytest

from sims.sosd.bridge import peak_times
from sims.sosd.spectral import _rolling_median, detect_onset

X = np.array([5.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0])


def test_rolling_median_window_3_by_hand():
    # record i uses records i-1, i, i+1 (those inside the series at the edges):
    # [5,1] -> 3; [5,1,9] -> 5; [1,9,2] -> 2; [9,2,8] -> 8; [2,8,3] -> 3; [8,3,7] -> 7; [3,7] -> 5
    assert _rolling_median(X, 3).tolist() == [3.0, 5.0, 2.0, 8.0, 3.0, 7.0, 5.0]


def test_rolling_median_window_5_by_hand():
    # records i-2 .. i+2: [5,1,9] -> 5; [5,1,9,2] -> 3.5; [5,1,9,2,8] -> 5; [1,9,2,8,3] -> 3;
    # [9,2,8,3,7] -> 7; [2,8,3,7] -> 5; [8,3,7] -> 7
    assert _rolling_median(X, 5).tolist() == [5.0, 3.5, 5.0, 3.0, 7.0, 5.0, 7.0]


def test_rolling_median_even_window_uses_exactly_w_records_by_hand():
    # w = 4: records i-2 .. i+1 (one more on the left, as pandas' centred window):
    # [5,1] -> 3; [5,1,9] -> 5; [5,1,9,2] -> 3.5; [1,9,2,8] -> 5; [9,2,8,3] -> 5.5;
    # [2,8,3,7] -> 5; [8,3,7] -> 7. A window i-2 .. i+2 (w + 1 records) gives 5, 5, 7 at 2, 3, 4.
    assert _rolling_median(X, 4).tolist() == [3.0, 5.0, 3.5, 5.0, 5.5, 5.0, 7.0]


@pytest.mark.parametrize("w", [1, 2, 3, 4, 6, 7, 10])
def test_rolling_median_matches_pandas_centred_rolling(w):
    import pandas as pd  # an xarray dependency, independent of the code under test
    x = np.random.default_rng(w).normal(size=23)
    x[[3, 4, 11]] = np.nan
    want = pd.Series(x).rolling(w, center=True, min_periods=1).median().to_numpy()
    np.testing.assert_allclose(_rolling_median(x, w), want, rtol=0, atol=1e-15)


def test_rolling_median_ignores_nans_and_keeps_an_all_nan_window_nan():
    x = np.array([1.0, np.nan, 3.0, np.nan, np.nan, np.nan, 4.0])
    got = _rolling_median(x, 3)
    # [1,nan] -> 1; [1,nan,3] -> 2; [nan,3,nan] -> 3; [3,nan,nan] -> 3; [nan,nan,nan] -> nan;
    # [nan,nan,4] -> 4; [nan,4] -> 4
    assert got[:4].tolist() == [1.0, 2.0, 3.0, 3.0] and math.isnan(got[4])
    assert got[5:].tolist() == [4.0, 4.0]


def test_rolling_median_window_1_is_the_identity():
    assert _rolling_median(X, 1).tolist() == X.tolist()


# log10 ΔΣ per record: a rise to a peak at record 2, a plateau, a drop to the floor -3 at
# record 7, and one isolated spike inside the floor at record 11.
S = np.array([0.0, 1.0, 2.0, 1.5, 1.5, 1.5, 1.5, -3, -3, -3, -3, 1.0, -3, -3, -3, -3, -3, -3])
T = 10.0 * np.arange(S.size)


def test_floor_onset_with_a_window_of_3_records_by_hand():
    """Smoothed (w = 3): record 6 = med(1.5, 1.5, -3) = 1.5, record 7 = med(1.5, -3, -3) = -3;
    the spike at 11 is removed (med(-3, 1, -3) = -3) and records 10 and 12 stay -3. The floor is
    -3, the threshold -3 + log10 2; the first record after the peak (2) from which 3 smoothed
    records stay below it is 7: step 70. A window [i-1, i] (one short, not centred) smooths
    record 7 to med(1.5, -3) = -0.75 and gives step 80."""
    res = detect_onset(T, 10**S, window=3, kappa=2.0)
    assert res.success and res.step == 70.0, res
    assert res.peak_step == 20.0 and res.floor == -3.0 and res.window == 3
    assert res.smoothed[6] == 1.5 and res.smoothed[7] == -3.0 and res.smoothed[11] == -3.0


def test_floor_onset_with_a_window_of_5_records_by_hand():
    """Smoothed (w = 5): record 5 = med(1.5, 1.5, 1.5, 1.5, -3) = 1.5, record 6 =
    med(1.5, 1.5, 1.5, -3, -3) = 1.5, record 7 = med(1.5, 1.5, -3, -3, -3) = -3, and records
    9-13 stay -3 (the spike is one of five). The onset is record 7 (step 70); the peak of the
    smoothed series is record 3, med(1, 2, 1.5, 1.5, 1.5) = 1.5, first of the 1.5 plateau
    (record 2 is med(0, 1, 2, 1.5, 1.5) = 1.5 too: argmax takes the first, record 2)."""
    res = detect_onset(T, 10**S, window=5, kappa=2.0)
    assert res.success and res.step == 70.0, res
    assert res.smoothed[2:7].tolist() == [1.5] * 5 and res.peak_step == 20.0
    assert res.smoothed[7:].tolist() == [-3.0] * (S.size - 7)


def test_a_dip_shorter_than_the_hold_window_is_not_the_onset():
    """log10 ΔΣ: peak, plateau 1.5, a two-record dip to -3 (records 5-6), plateau, then the floor
    from record 10. Smoothed (w = 3): records 5 and 6 are -3 (med(1.5, -3, -3), med(-3, -3,
    1.5)), record 7 is med(-3, 1.5, 1.5) = 1.5: the dip lasts 2 smoothed records, fewer than the
    3 that must stay below the threshold, so the onset is record 10 = med(1.5, -3, -3) = -3
    (step 100), not 5 (a hold of 2 records would say 50)."""
    s = np.array([0, 1, 2, 1.5, 1.5, -3, -3, 1.5, 1.5, 1.5, -3, -3, -3, -3, -3, -3])
    res = detect_onset(10.0 * np.arange(s.size), 10**s, window=3, kappa=2.0)
    assert res.success and res.step == 100.0, res
    assert res.smoothed[5:8].tolist() == [-3.0, -3.0, 1.5]


def test_an_onset_in_the_last_window_of_records_is_found():
    """The floor is reached only for the last 3 records (9-11 of 12; floor_frac 0.25 = those 3):
    smoothed record 9 = med(1.5, -3, -3) = -3, so the first (and only) candidate is record
    9 = n - window, the last start the hold window allows: step 90."""
    s = np.array([0, 1, 2, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, -3, -3, -3])
    res = detect_onset(10.0 * np.arange(s.size), 10**s, window=3, kappa=2.0)
    assert res.success and res.step == 90.0, res
    assert res.floor == -3.0


def test_peak_times_with_a_window_of_3_by_hand():
    """log10 x = [0, 0, 2, 0, 0, 0, 1.5, 1.5, 0, 0]: the one-record spike at 2 is smoothed away
    (med(0, 2, 0) = 0); the two-record bump stays: record 6 = med(0, 1.5, 1.5) = 1.5, record 7 =
    med(1.5, 1.5, 0) = 1.5, record 8 = med(1.5, 0, 0) = 0. A peak is >= its left neighbour and
    > its right one, so the plateau's peak is record 7 (step 70); prominence 1.5 decades >
    log10 3. Unsmoothed, the spike at record 2 counts too."""
    t = 10.0 * np.arange(10)
    x = 10 ** np.array([0, 0, 2, 0, 0, 0, 1.5, 1.5, 0, 0])
    assert peak_times(t, x, min_ratio=3, smooth=3).tolist() == [70.0]
    assert peak_times(t, x, min_ratio=3, smooth=1).tolist() == [20.0, 70.0]


@pytest.mark.parametrize("w", [3, 5, 7])
def test_rolling_median_equals_a_brute_force_centred_median(w):
    rng = np.random.default_rng(w)
    x = rng.standard_normal(23)
    x[[4, 5, 17]] = np.nan
    half = w // 2
    want = []
    for i in range(x.size):
        seg = [x[j] for j in range(x.size) if abs(j - i) <= half and np.isfinite(x[j])]
        want.append(float(np.median(seg)) if seg else math.nan)
    np.testing.assert_array_equal(_rolling_median(x, w), np.array(want))
