import os
import warnings

import pytest
import torch

# Two cores on the CI machine: one intra-op thread per test process keeps timings stable.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def minilm_dir():
    from bertkit.assets import minilm_dir

    return minilm_dir()


@pytest.fixture(scope="session")
def bbc_dir():
    from bertkit.assets import bbc_dir

    return bbc_dir()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
