"""The shared argument check: every module's integer arguments fail the same way."""
import numpy as np
import pytest

from gluon_bbb._checks import check_int


def test_check_int_accepts_python_and_numpy_integers():
    assert check_int("n", 3) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_int("seed", 0, minimum=0) == 0


@pytest.mark.parametrize("value", [0, -1, True, 2.0, "2", None])
def test_check_int_names_the_argument(value):
    with pytest.raises(ValueError, match=r"num_epochs must be an integer >= 1, got "):
        check_int("num_epochs", value)
