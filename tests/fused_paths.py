"""A parametrised autouse fixture that runs a test module on both sampling paths.

'fused': the C++ operator of :mod:`gluon_bbb.fused` (it must build wherever a C++ compiler
exists; without one the fused variant is skipped, with the reason). 'mxnet': the pure-MXNet
path, forced through the ``GLUON_BBB_FUSED`` switch.
"""
import pytest

from gluon_bbb import fused
from gluon_bbb.fused import build as fused_build


def fused_or_skip():
    """Skip when no compiler exists; fail loudly when one exists but the build fails."""
    if fused_build._compiler() is None:
        pytest.skip("no C++ compiler: the fused operator cannot be built here")
    status = fused.fused_status()
    assert status.available, f"the fused operator failed to build or load: {status.reason}"
    return status


@pytest.fixture(params=["fused", "mxnet"], autouse=True)
def sampling_path(request, monkeypatch):
    if request.param == "fused":
        monkeypatch.setenv(fused.ENV_SWITCH, "1")
        fused_or_skip()
    else:
        monkeypatch.setenv(fused.ENV_SWITCH, "0")
    return request.param
