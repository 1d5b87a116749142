"""Fill-mask inference: a masked-LM checkpoint's best fillers for each mask token of a text.

For a mask at position i the fillers are the top-k of softmax(logits_i) over the vocabulary,
with their probabilities.
"""

from __future__ import annotations

import re
import warnings

import torch

from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.models.heads import BertForMaskedLM
from bertkit.runtime.run_dir import not_a_model
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.display import display_tokens

TOP_K = 5  # fillers per mask


MASK_SPELLINGS = re.compile(r"\[mask\]|<mask>", re.IGNORECASE)  # BERT's and RoBERTa's, in any case


def check_mask_spelling(text: str, mask_token: str) -> None:
    """A mask written another way ([mask], RoBERTa's <mask> to a BERT model) is text to the
    tokenizer: name the spelling this model reads (case matters)."""
    if mask_token in text:
        return
    other = MASK_SPELLINGS.search(text)
    if other:
        raise DataError(f"no {mask_token} in the text, but {other.group(0)}: this model's mask token is "
                        f"{mask_token}, spelt exactly so (case matters)")


def mask_window(enc, mask_id: int, mask_token: str, limit: int) -> dict[str, torch.Tensor]:
    """The model's inputs for one encoded text: all of it when it fits in `limit` tokens, else
    [CLS] + the limit - 2 tokens centred on the masks + [SEP] (cutting the end, as truncation
    did, lost a mask near the end). Masks further apart than the model's length are refused."""
    n = enc["input_ids"].shape[1]
    masks = (enc["input_ids"][0] == mask_id).nonzero().flatten().tolist()
    if not masks:
        raise DataError(f"no {mask_token} in the text; put {mask_token} where a word should be predicted")
    if n <= limit:
        return {key: enc[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    room = limit - 2  # between the two special tokens
    if masks[-1] - masks[0] + 1 > room:
        raise DataError(f"the {mask_token}s lie {masks[-1] - masks[0] + 1} tokens apart, more than the {limit} the "
                        f"model reads at once; fill them in separate calls or shorten the text between them")
    centre = (masks[0] + masks[-1]) // 2
    # the first kept token after [CLS]: centred, yet covering every mask and inside the text
    start = min(max(centre - room // 2, masks[-1] - room + 1, 1), masks[0], n - 1 - room)
    keep = torch.tensor([0, *range(start, start + room), n - 1])
    warnings.warn(f"the text has {n} tokens, more than the model's {limit}; it read the {room} around the "
                  f"{mask_token} (tokens {start}-{start + room - 1}); shorten the text to choose the context",
                  stacklevel=3)
    return {key: enc[key][:, keep] for key in ("input_ids", "attention_mask", "token_type_ids")}


def fill_mask(model_dir: str, text: str, top_k: int = TOP_K, device: torch.device | str = "cpu"
              ) -> list[list[tuple[str, float]]]:
    """For each mask token in `text`, the top_k (token, probability) pairs, best first (the model
    runs on `device`); tokens as display text (bertkit/tokenizer/display.py)."""
    if top_k < 1:
        raise ConfigError(f"--top-k must be at least 1, got {top_k}")
    tok = Tokenizer.from_pretrained(model_dir)
    with warnings.catch_warnings():  # unused NSP/pooler weights are expected; missing ones checked below
        warnings.simplefilter("ignore")
        model, report = BertForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
    if report.missing_keys:
        # walk X: a checkpoint of another pre-training objective (docs/objectives.md's FirstLetterModel)
        # was told to use "one from bertkit pretrain", which it is: name what it holds instead
        kind = (getattr(model.config, "architectures", None) or [""])[0]
        held = f" (its config.json names {kind}, not a masked-LM model)" if kind and \
            "MaskedLM" not in kind and "PreTraining" not in kind else ""
        raise CheckpointError(f"{model_dir} has no trained MLM head ({report.missing_keys[0]} ...){held}; "
                              f"fill-mask needs a masked-LM checkpoint such as one from bertkit pretrain with "
                              f"data.objective mlm, mlm+nsp or mlm+sop{not_a_model(model_dir)}")
    check_mask_spelling(text, tok.mask_token)
    with warnings.catch_warnings():  # longer than the model is handled below, by a window
        warnings.simplefilter("ignore")
        enc = tok(text, truncation=False)
    enc = mask_window(enc, tok.mask_token_id, tok.mask_token, model.config.max_sequence_length)
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten()
    model.to(device)
    with torch.no_grad():
        logits = model(ids.to(device), attention_mask=enc["attention_mask"].to(device),
                       token_type_ids=enc["token_type_ids"].to(device)).logits[0].float().cpu()
    out = []
    for p in positions.tolist():
        probs = logits[p].softmax(-1)
        top = probs.topk(min(top_k, probs.numel()))
        # as text: a byte-level BPE token's bytes decoded ('。', not 'ãĢĤ'); WordPiece tokens as they are
        out.append(list(zip(display_tokens(tok, top.indices.tolist()), map(float, top.values))))
    return out
