import socket

import pytest
import torch

# scripts/test.sh runs one pytest worker per core (pytest-xdist), so each worker takes one
# intra-op thread; more threads than cores made small-model steps 10-20x slower (measured).
torch.set_num_threads(1)


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


@pytest.fixture()
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test (bertkit runs offline)."""
    def refuse(*args, **kwargs):
        raise AssertionError("bertkit opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
