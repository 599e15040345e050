"""Importable jobs for the process-pool tests (``spawn`` needs module-level functions)."""

import time

import xarray as xr


def sleepy_square(seconds: float) -> xr.Dataset:
    """Sleep, then return a Dataset (a stand-in for one training run)."""
    time.sleep(seconds)
    return xr.Dataset({"v": ((), seconds**2)})
