"""Optimizer tests run torch on one thread: tiny tensors gain nothing from two, and on a loaded
2-core machine the thread pool's contention made them ~10x slower."""

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
