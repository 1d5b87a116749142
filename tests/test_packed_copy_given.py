"""A packed inference copy given to `SentenceEncoder` runs as it is: its oneDNN weights have no
data pointer, which `fastpath.weights_key` (the freshness check of encode's copy) must accept."""

from __future__ import annotations

import numpy as np

from bertkit.models.config import BertConfig
from bertkit.inference.encode import SentenceEncoder
from bertkit.inference.fastpath import pack_for_cpu, weights_key
from bertkit.models.encoder import BertModel
from bertkit.tokenizer import Tokenizer


def test_a_packed_copy_given_encodes_like_the_original(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"the match ended {i} nil and shares fell" for i in range(50)) + "\n",
                      encoding="utf-8")
    tokenizer = Tokenizer.train_wordpiece([str(corpus)], vocab_size=120, min_frequency=1, show_progress=False)
    model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)).eval()
    copy = pack_for_cpu(model)
    key = weights_key(copy)
    assert key == weights_key(copy)  # stable while nothing changes
    texts = ["the match ended", "shares fell 3 nil and the match ended 4 nil", "nil"]
    given = SentenceEncoder(copy, tokenizer)
    assert given.runner is copy  # runs as it is: not packed again
    np.testing.assert_allclose(given.encode(texts), SentenceEncoder(model, tokenizer).encode(texts),
                               atol=1e-5, rtol=0)
