"""Continued pre-training: domain- and task-adaptive MLM (DAPT / TAPT) from a trained encoder.

    bertkit pretrain --config configs/dapt-minilm-bbc.toml --out runs/dapt

Gururangan et al. (2020), "Don't Stop Pretraining": a second phase of masked language
modelling on text of the target domain (DAPT) or of the task itself (TAPT) before fine-tuning.
In the pre-training recipe this is switched on by the `[model] init` key:

[model]  init = a model directory (config.json + weights + tokenizer) of any family: a
         BERT-family encoder (e.g. MiniLM) or any other family's (bertkit/models/families.py)
         head_init = "identity" | "normal"   the MLM head when the checkpoint has none
         freeze_encoder = false              true: train only the MLM head (a head warm-up)
         other config fields                 overrides that keep the weight shapes (dropout, ...)
[data]   corpus = the domain text (a directory, a file, JSONL, "bbc", a shard directory)
         general_corpus, general_fraction    a share of general text mixed into training
         general_max_documents               read at most this many general documents
         masking = "keyword", keywords = [...] or "file.txt", keyword_probability
         streaming = true                    see bertkit/data/streaming.py

What `init` changes:

* the encoder's weights come from the checkpoint and its config fixes the shape ([model]
  preset is ignored); the tokenizer is the checkpoint's (no vocabulary is trained), unless
  [tokenizer] path names another one with the same ids;
* an MLM head missing from the checkpoint (encoder-only models such as all-MiniLM-L6-v2) is
  created, its decoder tied to the word embeddings as always, and initialised as chosen by
  `head_init` (default "identity", below); a head present in the checkpoint is loaded;
* encoder weights missing from the checkpoint are an error (it is not this model);
* the checkpoint's pooler (the [CLS] dense + tanh that `BertForSequenceClassification` reads)
  is kept in the model, frozen and saved in every checkpoint: MLM does not use it, and
  dropping it would make a classifier fine-tuned on the adapted encoder start from a random
  pooler while one on the original starts from the trained one (an unfair comparison).

MLM head initialisation. The head computes logits = LN(gelu(W h + b)) E^T + c with E the
tied word embeddings. `head_init = "identity"` sets W = I, b = 0 (LN weight 1, bias 0,
c = 0): the last hidden state, which in a BERT-style residual stream stays close to the
embedding space, is scored directly against the embeddings. `"normal"` is BERT's fresh init,
W ~ N(0, initializer_range^2), b = 0. Measured on BBC business text with all-MiniLM-L6-v2
(128 held-out sequences, 15% masking): at step 0 identity predicts 5.1% of the masked tokens
(normal 0.0%) but has a slightly higher loss (10.82 vs 10.55 nats: sharper wrong logits);
after 120 head-only AdamW steps (lr 1e-3) the held-out loss is 6.80 (identity) vs 6.89
(normal), and identity is ahead at every point measured (10/30/60/120 steps). Identity is the
default; the decoder bias c starts at 0 in both.

Mixing general text (`general_fraction = f`): the general corpus is tokenized into
OUT/general-shards with the same tokenizer and split into train / held-out documents like the
domain corpus. A share f of the *training sequences* is general text (both kinds are packed
to max_length, so this is also about f of the tokens): in memory, round(f / (1 - f) * n)
general examples join the n domain examples (a seeded sample, repeated when the general
corpus is smaller); streamed, example i is general exactly when floor((i + 1) f) > floor(i f),
so any window of n examples holds n f +- 1 general ones. With a general corpus set, every
evaluation also reports `general_mlm_loss` / `general_mlm_accuracy` / `general_perplexity`
on its held-out documents: the forgetting monitor (f = 0 evaluates without mixing).

Keyword masking (`masking = "keyword"`): every occurrence of a keyword (a single word, matched
in lower-case and capitalised spellings) is masked with probability `keyword_probability`; the
rest of the 15% budget is filled by uniform token masking over the other tokens. Keywords come
from a list or a text file (one word per line, `#` starts a comment).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn

from bertkit.models.checkpoint import load_into, read_config, read_state_dict
from bertkit.models.families import families, family_of
from bertkit.data.documents import CorpusDocuments, shard_documents, split_documents
from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.io import atomic_open
from bertkit.models.encoder import BertPooler
from bertkit.models.hf_compat import tied_decoders
from bertkit.runtime.run_dir import not_a_model
from bertkit.tasks.realdata import bbc_topics
from bertkit.tokenizer.extend import old_pieces

INIT_KEYS = ("init", "head_init", "freeze_encoder")
HEAD_INITS = ("identity", "normal")


# ---------------------------------------------------------------------------- config checks
def check_model_section(model: dict) -> None:
    """Validate the continued-pre-training keys of a `[model]` table."""
    init = model.get("init", "")
    if not init:
        given = [k for k in INIT_KEYS[1:] if k in model]
        if given:
            raise ConfigError(f"model.{given[0]} only applies when continuing from a checkpoint; "
                              "set model.init = \"path/to/model\" or remove it")
        return
    if not isinstance(init, str) or not os.path.isfile(os.path.join(init, "config.json")):
        hint = not_a_model(init) if isinstance(init, str) else ""
        raise ConfigError(f"model.init = {init!r} is not a model directory (no config.json); give a "
                          f"directory written by save_pretrained or a Hugging Face model directory{hint}")
    head_init = model.get("head_init", HEAD_INITS[0])
    if head_init not in HEAD_INITS:
        raise ConfigError(f"model.head_init {head_init!r} is not known; use one of {', '.join(HEAD_INITS)}")
    if not isinstance(model.get("freeze_encoder", False), bool):
        raise ConfigError(f"model.freeze_encoder must be true or false, got {model['freeze_encoder']!r}")
    if "vocab_size" in model:
        raise ConfigError("model.vocab_size cannot change when continuing from model.init: the "
                          "checkpoint's embeddings fix it; remove model.vocab_size")


def check_data_section(data) -> None:
    """Validate the DAPT / streaming keys of a pre-training `[data]` section."""
    if data.masking == "keyword" and not data.keywords:
        raise ConfigError("data.masking = \"keyword\" needs data.keywords: a list of words or a "
                          "file with one word per line")
    if data.keywords and data.masking != "keyword":
        raise ConfigError(f"data.keywords are only used by keyword masking; set data.masking = "
                          f"\"keyword\" (now {data.masking!r}) or remove data.keywords")
    if not isinstance(data.keywords, (str, list)):
        raise ConfigError(f"data.keywords must be a list of words or a file path, got {data.keywords!r}")
    if not 0.0 <= data.keyword_probability <= 1.0:
        raise ConfigError(f"data.keyword_probability must be in [0, 1], got {data.keyword_probability}")
    if not 0.0 <= data.general_fraction < 1.0:
        raise ConfigError(f"data.general_fraction must be in [0, 1), got {data.general_fraction}")
    if data.general_fraction and not data.general_corpus:
        raise ConfigError("data.general_fraction needs data.general_corpus (e.g. \"wordnet\" or a path)")
    if not isinstance(data.general_max_documents, int) or data.general_max_documents < 0:
        raise ConfigError(f"data.general_max_documents must be an integer >= 0, got {data.general_max_documents!r}")
    if not isinstance(data.block_docs, int) or data.block_docs < 1:
        raise ConfigError(f"data.block_docs must be a positive integer, got {data.block_docs!r}")
    if data.streaming and data.static_masking:
        raise ConfigError("data.static_masking needs the in-memory examples; use it with data.streaming = false")


# ---------------------------------------------------------------------------- the model
def init_mlm_head(head, how: str, std: float) -> None:
    """(Re)initialise an MLM head's own weights (not the tied decoder matrix): a dense map and a
    norm, under `transform` (BERT's `BertLMPredictionHead`: transform.dense, transform.LayerNorm,
    bias) or on the head itself (dense, norm)."""
    transform = getattr(head, "transform", head)
    dense = transform.dense
    norm = getattr(transform, "LayerNorm", None) or transform.norm
    with torch.no_grad():
        if how == "identity":
            if dense.weight.shape[0] != dense.weight.shape[1]:
                raise ConfigError(f"model.head_init = \"identity\" needs a square transform; this "
                                  f"model maps {dense.weight.shape[1]} to {dense.weight.shape[0]}: "
                                  "use head_init = \"normal\"")
            dense.weight.copy_(torch.eye(dense.weight.shape[0]))
        elif how == "normal":
            nn.init.normal_(dense.weight, mean=0.0, std=std)
        else:
            raise ConfigError(f"unknown head_init {how!r}; use one of {', '.join(HEAD_INITS)}")
        for bias in (dense.bias, norm.bias, getattr(head, "bias", None)):
            if bias is not None:  # a family without biases has none to zero
                bias.zero_()
        norm.weight.fill_(1.0)


TAPT_RECIPE = "configs/tapt-mini.toml"  # continued pre-training whose [model] sets only init: any family


def refuse_other_architecture(model: dict, from_recipe: set = frozenset()) -> None:
    """With model.init the checkpoint fixes the architecture: a model_type other than its own, or
    a key only another family has, is refused before any work, naming the way on. Refused, not
    dropped: a from-scratch recipe's [train] and [data] (its lr, its masking) were set for that
    model, and walk O #9 got "remove model.model_type" (a bundled recipe's key: not removable from
    the command line), then an internal "replace: ... is not a BertConfig field"."""
    init = model["init"]
    config = read_config(init)
    family = family_of(config)
    keys = [k for k in model if k not in family.recipe_keys and k not in ("preset", *INIT_KEYS)
            and any(k in other.recipe_keys for other in families())]
    if model.get("model_type", config.model_type) != config.model_type:
        keys.insert(0, "model_type")
    if not keys:
        return
    named = ", ".join(f"model.{k} = {model[k]!r}" if k == "model_type" else f"model.{k}" for k in keys)
    held = f"{init} holds a {config.model_type!r} model ({family.name} family), whose architecture it fixes"
    if any(k in from_recipe for k in keys):
        raise ConfigError(f"the recipe is for another model than model.init's (it sets {named}): {held}; continue "
                          f"it with {TAPT_RECIPE} (continued pre-training: its [model] sets only init), or a copy "
                          "of this recipe without those keys")
    raise ConfigError(f"{named} does not fit model.init: {held}; drop it from --set")


def read_init_config(model_section: dict):
    """The checkpoint's config (of the family its config.json names), with the
    [model] overrides that keep the weight shapes; a different model_type is refused."""
    init = model_section["init"]
    config = read_config(init)
    overrides = {k: v for k, v in model_section.items() if k not in ("preset", *INIT_KEYS)}
    asked = overrides.pop("model_type", config.model_type)
    if asked != config.model_type:
        raise ConfigError(f"model.model_type = {asked!r} but {init} holds a {config.model_type!r} model; "
                          f"remove model.model_type (the checkpoint fixes it) or give a {asked} checkpoint")
    return config.replace(**overrides) if overrides else config


def load_init_model(model_section: dict, build: Callable, vocab_size: int,
                    max_length: int, pad_token_id: int | None = None):
    """`build(config)` (an MLM model of the checkpoint's family: BertForMaskedLM / BertForPreTraining,
    or another family's masked-LM class) with the encoder of `model_section["init"]`.

    Returns (model, info) where info lists the head weights that were created and the
    checkpoint weights that were not used (e.g. a sentence-embedding model's pooler).
    """
    init = model_section["init"]
    config = read_init_config(model_section)
    if vocab_size > config.vocab_size:
        raise ConfigError(f"the tokenizer has {vocab_size} ids but {init} embeds {config.vocab_size}; "
                          "continue with the checkpoint's own tokenizer (leave [tokenizer] path empty)")
    if pad_token_id is not None and pad_token_id != config.pad_token_id:
        raise ConfigError(f"the tokenizer pads with id {pad_token_id} but {init} was trained with "
                          f"pad_token_id={config.pad_token_id}; use the checkpoint's own tokenizer")
    if max_length > config.max_sequence_length:
        raise ConfigError(f"data.max_length={max_length} exceeds the {config.max_sequence_length} "
                          f"positions of {init}; lower data.max_length")
    model = build(config)  # every weight freshly initialised, then the checkpoint's copied in
    encoder = getattr(model, model.base_model_prefix)
    head, head_prefixes = family_of(config).mlm_head(model)
    pooler_prefix = f"{model.base_model_prefix}.pooler."
    state = read_state_dict(init)
    carry_pooler = (getattr(encoder, "pooler", False) is None
                    and any(".pooler." in k or k.startswith("pooler.") for k in state))
    if carry_pooler:
        encoder.pooler = BertPooler(config)  # carried through unchanged, see the module doc
    report = load_into(model, state, model.base_model_prefix)
    # Heads and the pooler may be new (BERT init); the encoder proper must come from `init`.
    missing_encoder = [k for k in report.missing_keys
                       if k.startswith(f"{model.base_model_prefix}.") and not k.startswith(pooler_prefix)]
    if missing_encoder:
        raise CheckpointError(f"{init} lacks {len(missing_encoder)} encoder weights of this model "
                              f"({', '.join(missing_encoder[:3])}); model.init must hold a trained "
                              "encoder of the config it ships")
    head_keys = [k for k in model.state_dict() if k.startswith(head_prefixes)]
    new_head = [k for k in report.missing_keys if k.startswith(head_prefixes)]
    if new_head:
        if len(new_head) < len(head_keys):
            raise CheckpointError(f"{init} holds part of an MLM head (missing {new_head[:3]}); "
                                  "give a checkpoint with the whole head or none")
        init_mlm_head(head, model_section.get("head_init", HEAD_INITS[0]), config.initializer_range)
    if carry_pooler:
        encoder.pooler.requires_grad_(False)  # MLM gives it no gradient; keep it out of AdamW/DDP
    if model_section.get("freeze_encoder", False):
        for p in encoder.parameters():
            p.requires_grad_(False)  # the tied decoder matrix is the embeddings: frozen too
    info = {"init": init, "new_head_weights": new_head, "unused_weights": report.unexpected_keys,
            "other_new_weights": [k for k in report.missing_keys if k not in new_head],
            "trainable_parameters": model.num_parameters(trainable_only=True)}
    return model, info


def grow_vocabulary(model, tokenizer, old_size: int) -> int:
    """Give every id of `tokenizer` from `old_size` on (words added by tokenizer.extend_vocab,
    tokenizer/extend.py) a row: the mean of the rows of the old pieces the word was split into,
    in the word embeddings (and so the tied MLM decoder) and in the decoder's bias. A word the
    model read as "km ##all ##oc" starts where those pieces were on average, not at a random
    point (Gee et al. 2022). Returns how many rows were added."""
    pieces = old_pieces(tokenizer, old_size)
    if not pieces:
        return 0
    new_size = max(pieces) + 1
    model.resize_token_embeddings(new_size)
    embedding = model.get_input_embeddings()
    biases = [decoder.bias for decoder in tied_decoders(model, embedding)]
    with torch.no_grad():
        for new_id, parts in pieces.items():
            embedding.weight[new_id] = embedding.weight[parts].mean(0)
            for bias in biases:
                bias[new_id] = bias[parts].mean()
    return len(pieces)


# ---------------------------------------------------------------------------- general text
@dataclass
class GeneralCorpus:
    """The general corpus: tokenized documents and their train / held-out split."""

    docs: object  # ShardedCorpus
    train_docs: np.ndarray
    eval_docs: np.ndarray


def open_general(data, seed: int, tokenizer, out_dir: str, ctx, progress: bool = False) -> GeneralCorpus | None:
    """The general corpus of [data] (None without `data.general_corpus`), split with train.seed `seed`;
    tokenized with a progress bar when `progress` (GCIDE takes about 45 s on a CPU)."""
    if not data.general_corpus:
        return None
    if ctx.is_main:  # walk O #2: a recipe's own general text, mixed in unsaid, and tokenized for a while
        share = f"{data.general_fraction:.0%} of the training sequences" if data.general_fraction else "evaluated only, not trained on"
        print(f"pretrain: mixing in data.general_corpus={data.general_corpus} ({share}; --set "
              f"'data.general_corpus=\"\"' to use only data.corpus): tokenizing it", flush=True)
    corpus = CorpusDocuments(data.general_corpus, data.mode, data.general_max_documents, keep=False)
    docs = shard_documents(corpus, tokenizer, os.path.join(out_dir, "general-shards"), is_main=ctx.is_main,
                           barrier=ctx.barrier, progress=progress)
    train_docs, eval_docs = split_documents(len(docs), data.eval_fraction, seed + 1)
    return GeneralCorpus(docs, train_docs, eval_docs)


def general_count(n_domain: int, fraction: float) -> int:
    """General examples to add to `n_domain` domain ones so that they are `fraction` of all."""
    return int(round(fraction / (1.0 - fraction) * n_domain)) if fraction else 0


def mix_examples(domain: list, general: list, fraction: float, seed: int) -> list:
    """`domain` plus general examples making up `fraction` of the result (a seeded sample;
    whole shuffled copies of `general` are repeated when it is too small)."""
    want = general_count(len(domain), fraction)
    if want == 0:
        return list(domain)
    if not general:
        raise DataError("the general corpus produced no example; check data.general_corpus")
    rng = np.random.default_rng([seed, 31])
    picks = []
    while len(picks) < want:
        picks.extend(rng.permutation(len(general))[: want - len(picks)].tolist())
    return list(domain) + [general[i] for i in picks]


# ---------------------------------------------------------------------------- data helpers
def write_bbc_split_corpus(path: str, topics: list[str], split: str = "train", split_seed: int = 0) -> int:
    """Write the BBC articles of `topics` in one split of `bertkit finetune`'s built-in `bbc`
    data as JSONL ({"text": ...} per line); returns the number of articles.

    Adapting on the train split only keeps the dev/test articles unseen, so a fine-tuning
    comparison after adaptation measures the domain, not memorised test text.
    """
    splits = bbc_topics(split_seed=split_seed)
    if split not in splits:
        raise ConfigError(f"unknown split {split!r}; use one of {', '.join(splits)}")
    known = sorted({ex.label for ex in splits[split]})
    unknown = [t for t in topics if t not in known]
    if unknown:
        raise ConfigError(f"unknown BBC topic {unknown[0]!r}; use some of {', '.join(known)}")
    rows = [ex.text for ex in splits[split] if ex.label in topics]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_open(path, "w", encoding="utf-8") as f:
        for text in rows:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    """`python -m bertkit.recipes.continued bbc-corpus --topics business tech --split train --out F`."""
    import argparse  # only this script entry point parses arguments

    parser = argparse.ArgumentParser(prog="python -m bertkit.recipes.continued")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("bbc-corpus", help="write BBC articles of some topics and one split as JSONL")
    p.add_argument("--topics", nargs="+", required=True)
    p.add_argument("--split", default="train", choices=("train", "dev", "test"))
    p.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        n = write_bbc_split_corpus(args.out, args.topics, args.split)
    except (ConfigError, DataError) as err:  # a misspelt topic: the one line, as bertkit's commands give it
        parser.error(str(err))
    print(f"wrote {n} articles to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
