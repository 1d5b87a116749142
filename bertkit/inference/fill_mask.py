"""Fill-mask inference: a masked-LM checkpoint's best fillers for each mask token of a text.

For a mask at position i the fillers are the top-k of softmax(logits_i) over the vocabulary,
with their probabilities.
"""

from __future__ import annotations

import warnings

import torch

from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.models.heads import BertForMaskedLM
from bertkit.tokenizer import Tokenizer

TOP_K = 5  # fillers per mask


def fill_mask(model_dir: str, text: str, top_k: int = TOP_K, device: torch.device | str = "cpu"
              ) -> list[list[tuple[str, float]]]:
    """For each mask token in `text`, the top_k (token, probability) pairs, best first (the model
    runs on `device`)."""
    if top_k < 1:
        raise ConfigError(f"--top-k must be at least 1, got {top_k}")
    tok = Tokenizer.from_pretrained(model_dir)
    with warnings.catch_warnings():  # unused NSP/pooler weights are expected; missing ones checked below
        warnings.simplefilter("ignore")
        model, report = BertForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
    if report.missing_keys:
        raise CheckpointError(f"{model_dir} has no trained MLM head ({report.missing_keys[0]} ...); "
                              "fill-mask needs a masked-LM checkpoint such as one from bertkit pretrain")
    enc = tok(text, truncation=True, max_length=model.config.max_position_embeddings)
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten()
    if positions.numel() == 0:
        raise DataError(f"no {tok.mask_token} in the text; put {tok.mask_token} where a word should be predicted")
    model.to(device)
    with torch.no_grad():
        logits = model(ids.to(device), attention_mask=enc["attention_mask"].to(device),
                       token_type_ids=enc["token_type_ids"].to(device)).logits[0].float().cpu()
    out = []
    for p in positions.tolist():
        probs = logits[p].softmax(-1)
        top = probs.topk(min(top_k, probs.numel()))
        out.append([(tok.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(top.values, top.indices)])
    return out
