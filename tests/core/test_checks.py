"""The shared argument check: every module's integer arguments fail the same way."""
import numpy as np
import pytest

from gluon_bbb._checks import check_int, check_positive


def test_check_int_accepts_python_and_numpy_integers():
    assert check_int("n", 3) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_int("seed", 0, minimum=0) == 0


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "2", None])
def test_check_int_names_the_argument(value):
    with pytest.raises(ValueError, match=r"num_epochs must be an integer >= 1, got "):
        check_int("num_epochs", value)


def test_check_positive_accepts_finite_positive_reals():
    assert check_positive("kl_scale", 0.25) == 0.25 and type(check_positive("x", np.float32(2))) is float
    assert check_positive("x", 3) == 3.0


@pytest.mark.parametrize("value", [0, -0.5, float("nan"), float("inf"), True, "1", None])
def test_check_positive_names_the_argument(value):
    with pytest.raises(ValueError, match=r"kl_scale must be a finite positive number, got "):
        check_positive("kl_scale", value)
