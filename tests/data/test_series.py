"""gluon_bbb.data.series: windows of a time series against a loop over the definition."""
import numpy as np
import pytest

from gluon_bbb.data import Windows, sliding_windows


@pytest.mark.parametrize("window, horizon", [(1, 1), (3, 1), (4, 2), (9, 1)])
def test_windows_follow_the_definition(window, horizon):
    series = np.random.default_rng(0).normal(size=10)
    windows = sliding_windows(series, window, horizon)
    assert isinstance(windows, Windows)
    count = len(series) - window - horizon + 1
    assert windows.inputs.shape == (count, window) and windows.targets.shape == (count,)
    assert windows.inputs.dtype == windows.targets.dtype == np.float32
    for i in range(count):  # inputs z_i..z_{i+L-1}, target z_{i+L-1+h}
        np.testing.assert_array_equal(windows.inputs[i], series[i:i + window].astype(np.float32))
        assert windows.target_index[i] == i + window - 1 + horizon
        assert windows.targets[i] == np.float32(series[i + window - 1 + horizon])
    assert np.all(np.diff(windows.target_index) == 1)


def test_the_shortest_series_gives_one_example_and_a_shorter_one_a_value_error():
    windows = sliding_windows([1.0, 2.0, 3.0], 2)
    np.testing.assert_array_equal(windows.inputs, [[1.0, 2.0]])
    np.testing.assert_array_equal(windows.targets, [3.0])
    with pytest.raises(ValueError, match="too short .* at least 4"):
        sliding_windows([1.0, 2.0, 3.0], 2, horizon=2)


@pytest.mark.parametrize("args, match", [(([[1.0, 2.0]], 1), "series"),
                                         (([1.0, np.nan, 2.0], 1), "NaN"),
                                         (([1.0, 2.0, 3.0], 0), "window"),
                                         (([1.0, 2.0, 3.0], 1, 0), "horizon"),
                                         (([1.0, 2.0, 3.0], 1.5), "window")])
def test_bad_arguments_raise_value_errors_naming_them(args, match):
    with pytest.raises(ValueError, match=match):
        sliding_windows(*args)
