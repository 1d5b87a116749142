"""The README's Python example runs as written (on the built-in MiniLM), so it cannot rot."""

import re
import warnings
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_example_runs(minilm_dir, tmp_path, monkeypatch):
    import bertkit

    blocks = python_blocks()
    assert blocks and all('"path/to/model"' in block for block in blocks)
    assert "bertkit.data.assets.minilm_dir()" in blocks[0]  # the example says where the built-in model is
    assert bertkit.data.assets.minilm_dir() == minilm_dir
    monkeypatch.chdir(tmp_path)  # the example writes out/...
    for block in blocks:
        namespace: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "classifier newly initialised"
            exec(compile(block.replace('"path/to/model"', repr(minilm_dir)), str(README), "exec"), namespace)
        if "vectors" in namespace:
            vectors = namespace["vectors"]
            assert vectors.shape == (2, 384)
            assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (tmp_path / "out" / "classifier" / "model.safetensors").is_file()
    assert (tmp_path / "out" / "embedder" / "modules.json").is_file()


def test_sentence_encoder_is_exported():
    import bertkit
    from bertkit.inference.encode import SentenceEncoder

    assert bertkit.SentenceEncoder is SentenceEncoder
