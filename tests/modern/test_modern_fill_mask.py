"""A modern MLM saved by bertkit with a bertkit tokenizer gives the same fill-mask top-5 through
transformers' `pipeline("fill-mask")` as through bertkit's fill-mask command."""

import os

import pytest
import torch

from bertkit.commands.fill_mask import fill_mask
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM
from bertkit.tokenizer import Tokenizer

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
transformers = pytest.importorskip("transformers")

TEXTS = ["the film won an [MASK] for best actress.", "shares in the [MASK] fell sharply on [MASK]."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    text = folder / "corpus.txt"
    text.write_text("\n".join([
        "the film won an award for best actress at the festival on monday.",
        "shares in the company fell sharply on monday after the announcement.",
        "the bank said profits rose and shares in the bank fell on tuesday.",
        "an actress and an actor won awards for the best film of the year.",
    ] * 20), encoding="utf-8")
    tok = Tokenizer.train_wordpiece([str(text)], vocab_size=200, min_frequency=1, show_progress=False)
    config = ModernBertConfig.preset(
        "tiny", vocab_size=tok.vocab_size, pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
        sep_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
        local_attention=4, initializer_range=0.3)  # wide init: well-separated logits, no near-ties
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("modern_mlm")
    ModernBertForMaskedLM(config).save_pretrained(out, tokenizer=tok)
    return str(out)


@pytest.mark.parametrize("text", TEXTS)
def test_fill_mask_agrees_with_transformers_pipeline(model_dir, text):
    ours = fill_mask(model_dir, text, top_k=5)
    fill = transformers.pipeline("fill-mask", model=model_dir, top_k=5, device="cpu")
    theirs = fill(text)
    if isinstance(theirs[0], dict):  # one mask: a flat list
        theirs = [theirs]
    assert len(ours) == len(theirs) == text.count("[MASK]")
    for mine, ref in zip(ours, theirs, strict=True):
        assert [t for t, _ in mine] == [r["token_str"].replace(" ", "") for r in ref]
        for (_, p), r in zip(mine, ref):
            assert abs(p - r["score"]) < 1e-5
    assert type(fill.model).__name__ == "ModernBertForMaskedLM"
