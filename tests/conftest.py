import socket
import warnings

import pytest
import torch

from bertkit.models.encoder import BertModel
from bertkit.tokenizer import Tokenizer

# scripts/test.sh runs one pytest worker per core (pytest-xdist), so each worker takes one
# intra-op thread; more threads than cores made small-model steps 10-20x slower (measured).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def minilm_dir():
    from bertkit.data.assets import minilm_dir

    return minilm_dir()


@pytest.fixture(scope="session")
def bbc_dir():
    from bertkit.data.assets import bbc_dir

    return bbc_dir()


@pytest.fixture(scope="session")
def minilm2_dir(tmp_path_factory, minilm_dir):
    """MiniLM cut to its first 2 layers, saved with its tokenizer: a real, small, fast encoder
    (its [CLS] state carries little before layer 6, so it serves token-level tasks). Read-only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layers 2..5 of the checkpoint are unused on purpose
        model = BertModel.from_pretrained(minilm_dir, num_hidden_layers=2)
    out = tmp_path_factory.mktemp("minilm2")
    model.save_pretrained(out, tokenizer=Tokenizer.from_pretrained(minilm_dir))
    return str(out)


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread for every test, and the count restored after it, so a test that sets
    its own (a --threads option, a benchmark) cannot leak it: tiny models gain nothing from two,
    and on a shared 2-core machine two spinning threads per process made steps 10-25x slower
    (measured). Module- and session-scoped fixtures rely on the setting at import above."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A module- or session-scoped fixture is built inside whichever test first asks for it, so
    without a seed its random weights depended on the tests this worker happened to run before
    (pytest-xdist deals files out differently each run): a random multiple-choice model's near-tied
    choices flipped under int8 in one CI run and not in the next. Seed each one as it is built."""
    if fixturedef.scope != "function":
        torch.manual_seed(0)
    yield


@pytest.fixture()
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test (bertkit runs offline)."""
    def refuse(*args, **kwargs):
        raise AssertionError("bertkit opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def pytest_collection_modifyitems(config, items):
    """Files holding a `slow` test run first, the rest after in their usual order. scripts/test.sh
    hands whole files to its workers in this order (--dist loadfile --no-loadscope-reorder): a
    one-test file of two minutes handed out last kept one core busy alone at the end of the run."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the order within each group stays
