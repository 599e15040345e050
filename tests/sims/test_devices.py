"""sims.runtime.devices.check_device: a bad or missing device is a one-line ValueError first."""

import doctest

import pytest

torch = pytest.importorskip("torch")

import sims.runtime.devices  # noqa: E402
from sims.runtime.devices import check_device  # noqa: E402


def test_doctests():
    result = doctest.testmod(sims.runtime.devices, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_parses_and_refuses():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match=r"`device`='gpu0' is not a torch device.*use 'cpu'"):
        check_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"`device`='cuda:1' but torch .* no usable CUDA"):
            check_device("cuda:1")
