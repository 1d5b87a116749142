"""The pre-training recipe: TOML config -> tokenizer -> token shards -> examples -> Trainer.

    bertkit pretrain --config configs/pretrain-tiny.toml --out runs/tiny [--set train.lr=1e-3] [--resume]

Sections of the config (every key is checked; a typo gets a "did you mean" suggestion):

[model]      preset = "tiny" | "mini" | ... plus any BertConfig field as an override; model_type
             ("bert" | "roberta" | "albert" | "electra" | ...) applies that family's defaults.
             vocab_size and pad_token_id come from the tokenizer; RoBERTa's position table gets
             max_length + pad_token_id + 1 rows (its positions are numbered after the pad row)
[tokenizer]  path = an existing tokenizer/model directory, or train one on the corpus: kind
             ("wordpiece", BERT's; "bpe", RoBERTa's byte-level BPE), vocab_size, min_frequency,
             lowercase (WordPiece only) -- saved to OUT/tokenizer
[data]       corpus ("bbc", "wordnet", a path, or a shard directory), objective (a name in
             the objective registry: "mlm" | "mlm+nsp" | "mlm+sop" | "electra" | yours),
             objective_module (a module or .py file that registers yours), builder (for
             "mlm"/"electra": "full_sentences" packs contiguous sentences to max_length,
             "doc_sentences", or "packed": best-fit rows of whole document pieces, data/packing.py),
             max_length, masking strategy and rate, static_masking, ...
[electra]    an objective's own settings, in a section named as the objective (ELECTRA's:
             generator_hidden_fraction, generator_layers, disc_weight, temperature)
[train]      the TrainConfig fields (max_steps, lr, batch_size, seed, ...)
[early_stopping]  patience (evaluations without improvement; 0 = off), min_delta, metric
             (held-out, default mlm_loss): stop early, best model kept in OUT/best (early_stopping.py)

The objective (`bertkit/objectives/`) decides the model, how examples become batches, the loss
(the model's output) and the held-out metrics; this recipe runs whichever it is given:
"mlm" BertForMaskedLM; "mlm+nsp" / "mlm+sop" BertForPreTraining (with model_type "albert" its
second head is ALBERT's sentence-order head); "electra" `ElectraPretrainer` (a small generator +
the discriminator, sharing embeddings). Besides the loss, the train rows of metrics.jsonl carry
the parts of the objective (mlm_loss / nsp_loss, generator_loss / discriminator_loss), and
aux_loss (the MoE load-balancing term) when the model has experts.

Steps: documents are tokenized once into memory-mapped shards (OUT/shards); documents are
split into train/held-out by a seeded shuffle; examples are built by the data package's
builders; batches group similar lengths (`LengthBucketedBatches`) and are masked dynamically by
the objective's collator (`MLMCollator` for the built-ins); held-out batches are collated once
with a fixed seed so evaluations compare.

Continued pre-training (DAPT/TAPT, `continued.py`): [model] init = a trained model directory
(its encoder and tokenizer; a missing MLM head is created: head_init, freeze_encoder);
[data] general_corpus / general_fraction mix in and evaluate general text, masking =
"keyword" with keywords / keyword_probability. Streaming (`bertkit/data/streaming.py`): [data] streaming =
true builds examples lazily per block of block_docs documents (corpora larger than memory),
with the data position saved in every checkpoint. See docs/dapt.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import shutil
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import torch

from bertkit.models.checkpoint import read_config
from bertkit.models.config import SIZE_PRESETS
from bertkit.data.cleaning import CleaningRules, clean_documents
from bertkit.data.collate import STRATEGIES
from bertkit.data.corpus import open_corpus
from bertkit.data.documents import (CorpusDocuments, check_document_count, is_shard_directory, origin_changes,
                                    refuse_prepared_shards, shard_documents, shard_origin, split_documents)
from bertkit.data.examples import BUILDERS, SpecialTokens, build_examples, make_builder
from bertkit.errors import BertkitError, ConfigError, DataError
from bertkit.io import atomic_write_json, loads_json, read_json_object, read_text, same_path
from bertkit.models.families import families, family_for, family_of
from bertkit.objectives import BUILT_IN, OBJECTIVES, Objective, get_objective, import_objective_module
from bertkit.runtime.run_dir import (check_apart, check_saved_options, latest_checkpoint, refuse_nothing_to_resume,
                                     refuse_unresumed, run_lock, warn_resuming_from_scratch)
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.display import display_tokens
from bertkit.tokenizer.extend import extended, words_to_add
from bertkit.tokenizer.training import small_vocabulary
from bertkit.train.batching import LengthBucketedBatches
from bertkit.settings.config_io import apply_overrides, check_keys, dataclass_from_dict, load_toml, Override, split_override, suggest
from bertkit.runtime.process_group import DistContext, init_distributed, shutdown
from bertkit.train.early_stopping import EarlyStoppingSection
from bertkit.objectives.metrics import unigram_baseline
from bertkit.data.streaming import streaming_batches, take_examples
from bertkit.train.config import TrainConfig
from bertkit.train.rng import seed_everything
from bertkit.train.trainer import Trainer
from bertkit.recipes.continued import (INIT_KEYS, GeneralCorpus, check_data_section, check_model_section, grow_vocabulary,
                        load_init_model, mix_examples, open_general, read_init_config,
                        refuse_other_architecture)

TOKENIZER_KINDS = ("wordpiece", "bpe")
RUN_FILE = "pretrain_config.json"  # the options of the run, checked when it is resumed
# In OUT/tokenizer: the corpus and [tokenizer] settings it was trained on (data.corpus, the corpus
# files' fingerprint, ...), so a rerun into the same --out does not reuse one trained on other data.
TOKENIZER_ORIGIN = "bertkit_trained_on.json"


@dataclass
class TokenizerSection:
    path: str = ""  # an existing tokenizer (or model) directory; empty = train one
    kind: str = "wordpiece"  # "wordpiece" (BERT, [PAD]=0) | "bpe" (RoBERTa's byte-level BPE, <pad>=1)
    vocab_size: int = 8000
    min_frequency: int = 2
    lowercase: bool | None = None  # WordPiece: None = True (uncased); byte-level BPE keeps case
    # With model.init: add up to this many words of data.corpus that the checkpoint's WordPiece or
    # byte-level BPE vocabulary splits (those saving the most tokens), their rows the mean of their old pieces'
    # (tokenizer/extend.py). 0 keeps the checkpoint's vocabulary as it is.
    extend_vocab: int = 0

    def __post_init__(self):
        if self.kind not in TOKENIZER_KINDS:
            raise ConfigError(f"tokenizer.kind {self.kind!r} is not known; use one of "
                              f"{', '.join(TOKENIZER_KINDS)}")
        if not isinstance(self.extend_vocab, int) or isinstance(self.extend_vocab, bool) or self.extend_vocab < 0:
            raise ConfigError(f"tokenizer.extend_vocab must be a number of words >= 0, got {self.extend_vocab!r}")
        if self.kind == "bpe" and self.lowercase:
            raise ConfigError("tokenizer.lowercase does not apply to kind \"bpe\" (byte-level BPE keeps "
                              "case, as RoBERTa's); remove tokenizer.lowercase or use kind \"wordpiece\"")


MAX_LENGTH = 8192  # tokens per sequence: the longest context of today's encoders; far above it masks outgrow memory


@dataclass
class DataSection:
    corpus: str = "bbc"
    mode: str = "file"  # how text files split into documents: "file" | "line" | "blank" | "jsonl"
    text_field: str = "text"  # the text's field (.jsonl) or column (.csv, .tsv) of a table corpus
    objective: str = "mlm"  # a name in the objective registry (bertkit/objectives/)
    objective_module: str = ""  # a module (dotted name or .py file) imported first: it registers objectives
    builder: str = ""  # empty: the objective's first builder (full_sentences for mlm, nsp/sop for pairs); "packed": packing.py
    max_length: int = 128
    masking: str = "token"  # "token" | "whole_word" | "span" | "keyword"
    mlm_probability: float = 0.15
    static_masking: bool = False  # True: the same mask every epoch (original BERT)
    eval_fraction: float = 0.05  # share of documents held out
    max_eval_examples: int = 512  # evaluation cost is bounded by this
    max_documents: int = 0  # 0 = the whole corpus; >0 = the first N (quick runs)
    bucket_size: int = 50  # batches per length-sorting chunk
    # Domain-adaptive pre-training (bertkit/recipes/continued.py) and streaming (train/streaming.py):
    keywords: list | str = field(default_factory=list)  # masking = "keyword": words or a file
    keyword_probability: float = 0.5  # each keyword occurrence is masked with this probability
    general_corpus: str = ""  # general text: mixed in (general_fraction) and evaluated on
    general_fraction: float = 0.0  # share of training sequences taken from general_corpus
    general_max_documents: int = 0  # 0 = the whole general corpus
    streaming: bool = False  # True: examples built lazily per block (corpora larger than memory)
    block_docs: int = 256  # streaming: documents whose examples are built and shuffled together
    # Cleaning of the training documents after the split (data/cleaning.py; held-out ones are kept):
    dedup: bool = False  # drop training documents equal (as token ids) to a held-out or an earlier one
    min_words: int = 0  # drop training sentences with fewer words (0 = off; C4 keeps lines of >= 5)
    min_alpha_fraction: float = 0.0  # drop training sentences with a smaller share of words with a letter (Gopher: 0.8)

    def __post_init__(self):
        builders = get_objective(self.objective).builders
        if not self.builder:
            self.builder = builders[0]
        if self.builder not in builders:
            raise ConfigError(f"data.objective {self.objective} needs data.builder = "
                              f"{' or '.join(repr(b) for b in builders)} (got {self.builder!r})")
        if not 0.0 < self.eval_fraction < 1.0:
            raise ConfigError(f"data.eval_fraction must be in (0, 1), got {self.eval_fraction}")
        if not 8 <= self.max_length <= MAX_LENGTH:
            raise ConfigError(f"data.max_length must be between 8 and {MAX_LENGTH} (the longest context of "
                              f"today's encoders), got {self.max_length}")
        # checked here, not when the collator is built: that is after the tokenizer and shards
        if self.masking not in STRATEGIES:
            raise ConfigError(f"data.masking {self.masking!r} is not known; use one of {', '.join(STRATEGIES)}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(f"data.mlm_probability must be in (0, 1) (e.g. 0.15), got {self.mlm_probability!r}")
        for name in ("max_eval_examples", "bucket_size", "max_documents"):
            if getattr(self, name) < (0 if name == "max_documents" else 1):
                raise ConfigError(f"data.{name} must be an integer >= {0 if name == 'max_documents' else 1}, "
                                  f"got {getattr(self, name)!r}")
        check_data_section(self)
        cleaning_rules(self)  # data.dedup, min_words, min_alpha_fraction: checked now


@dataclass
class PretrainConfig:
    model: dict = field(default_factory=lambda: {"preset": "tiny"})
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    objective_settings: object | None = None  # the objective's own section ([electra]), if it has one
    early_stopping: EarlyStoppingSection = field(default_factory=EarlyStoppingSection)

    @property
    def objective(self) -> Objective:
        return get_objective(self.data.objective)

    def to_dict(self) -> dict:
        out = {"model": dict(self.model), "tokenizer": dataclasses.asdict(self.tokenizer),
               "data": dataclasses.asdict(self.data), "train": dataclasses.asdict(self.train),
               "early_stopping": dataclasses.asdict(self.early_stopping)}
        if self.objective_settings is not None:
            out[self.data.objective] = dataclasses.asdict(self.objective_settings)
        return out


# ---------------------------------------------------------------------------- the config
def pretrain_sections() -> dict[str, list[str]]:
    """Every section and its keys; objectives with settings add a section named as themselves."""
    # every family's config fields (the model_type's family checks its own in config_from_recipe)
    model_keys = ["preset", *INIT_KEYS] + sorted({key for family in families() for key in family.recipe_keys})
    sections = {"model": model_keys,
                "tokenizer": [f.name for f in dataclasses.fields(TokenizerSection)],
                "data": [f.name for f in dataclasses.fields(DataSection)],
                "train": [f.name for f in dataclasses.fields(TrainConfig)],
                "early_stopping": [f.name for f in dataclasses.fields(EarlyStoppingSection)]}
    for name, objective in OBJECTIVES.items():
        if objective.settings is not None:
            sections[name] = [f.name for f in dataclasses.fields(objective.settings)]
    return sections


def _objective_module(raw: dict, overrides) -> str:
    """data.objective_module, with a `--set` taking precedence: read before anything else is
    checked, since the module it names can add objectives and their sections."""
    module = raw.get("data", {}).get("objective_module", "")
    for item in overrides:
        key, value = split_override(item)
        if key == "data.objective_module":
            module = value
    return module


def _objective_settings(raw: dict, data: DataSection, model: dict):
    """The chosen objective's settings section (None if it has none); another objective's
    section, or a model_type the objective cannot train, is an error."""
    objective = get_objective(data.objective)
    for name in raw:
        if name in OBJECTIVES and name != data.objective and raw[name]:
            raise ConfigError(f"[{name}] settings are only used with data.objective = \"{name}\" (got "
                              f"{data.objective!r}); remove the [{name}] section or change the objective")
    if objective.model_type and model.get("init"):
        raise ConfigError(f"data.objective = \"{data.objective}\" builds and trains a new {objective.model_type} model; "
                          "it does not continue a checkpoint (model.init): continue with data.objective = \"mlm\", "
                          "or leave model.init out")
    if objective.model_type and model.setdefault("model_type", objective.model_type) != objective.model_type:
        raise ConfigError(f"data.objective = \"{data.objective}\" trains a model_type \"{objective.model_type}\" "
                          f"model (got {model['model_type']!r}): use a recipe of that family, or set "
                          f"model.model_type = \"{objective.model_type}\"")
    if objective.settings is None:
        return None
    return dataclass_from_dict(objective.settings, raw.get(data.objective, {}), data.objective)


# [data] keys of a fine-tuning recipe that no pre-training recipe has
FINETUNE_DATA_KEYS = frozenset({"label_column", "text_column", "pair_column", "eval_batch_size", "long_text",
                                "multilabel_sep", "max_train_examples"})


def parse_config(raw: dict, overrides: Sequence[Override] = ()) -> PretrainConfig:
    """Validate a raw TOML dict (plus `--set` strings and typed (key, value) overrides) into a PretrainConfig."""
    import_objective_module(_objective_module(raw, overrides))
    sections = pretrain_sections()
    finetuning = sorted(FINETUNE_DATA_KEYS & set(raw.get("data", {})))
    if finetuning:  # `pretrain --config configs/finetune-bbc.toml`: say which recipe this is
        raise ConfigError(f"the recipe sets data.{finetuning[0]}, a fine-tuning setting: it is a fine-tuning "
                          "recipe (bertkit finetune --config); pretrain reads a pre-training recipe such as "
                          "configs/pretrain-tiny.toml")
    for name in raw:
        if name not in sections:
            raise ConfigError(f"unknown section [{name}]; {suggest(name, sections)}")
    given = {split_override(item)[0] for item in overrides}
    from_recipe = {key for key in raw.get("model", {}) if f"model.{key}" not in given}
    raw = apply_overrides(raw, overrides, sections)
    model = dict(raw.get("model", {}))
    check_keys(model, sections["model"], "model")
    check_model_section(model)
    if not model.get("init"):  # (a checkpoint's own config decides its family)
        refuse_other_family_keys(model, family_for(model.get("model_type", "bert")), from_recipe)
    else:
        refuse_other_architecture(model, from_recipe)
    model.setdefault("preset", "tiny")  # unused with model.init (the checkpoint fixes the shape)
    if model["preset"] not in SIZE_PRESETS:
        raise ConfigError(f"model.preset {model['preset']!r} is not known; use one of {sorted(SIZE_PRESETS)}")
    data = dataclass_from_dict(DataSection, raw.get("data", {}), "data")
    settings = _objective_settings(raw, data, model)
    cfg = PretrainConfig(
        model=model,
        tokenizer=dataclass_from_dict(TokenizerSection, raw.get("tokenizer", {}), "tokenizer"),
        data=data,
        train=TrainConfig.from_dict(_start_evaluated(raw.get("train", {}), model)),
        objective_settings=settings,
        early_stopping=dataclass_from_dict(EarlyStoppingSection, raw.get("early_stopping", {}), "early_stopping"),
    )
    _refuse_pairs_without_segments(cfg)
    _check_early_stopping_metric(cfg)
    _check_objective_builds(cfg)
    if cfg.tokenizer.extend_vocab and (not model.get("init") or cfg.tokenizer.path):
        raise ConfigError("tokenizer.extend_vocab grows the vocabulary of model.init's checkpoint: set model.init "
                          "(and leave tokenizer.path empty), or --set tokenizer.extend_vocab=0 (a run from scratch "
                          "trains its own vocabulary on data.corpus)")
    return cfg


def _refuse_pairs_without_segments(cfg: PretrainConfig) -> None:
    """A sentence-pair objective (NSP, SOP) on a family without segment embeddings (the default
    recipe's) is refused here: its model used to refuse it only after the tokenizer and the
    shards were built (walk V)."""
    if not cfg.objective.pairs:
        return
    init = cfg.model.get("init")
    model_type = read_config(init).model_type if init else cfg.model.get("model_type", "bert")
    family = family_for(model_type)
    if family.has_segments:
        return
    held = f"model.init {init} holds a {model_type!r} model" if init else f"model.model_type is {model_type!r}"
    raise ConfigError(f"data.objective = \"{cfg.data.objective}\" trains a sentence-pair head on segments "
                      f"(token_type_ids), which the {family.name} has not ({held}): use data.objective = \"mlm\", "
                      "or a BERT-family recipe (configs/pretrain-tiny-bert.toml)")


def _check_objective_builds(cfg: PretrainConfig) -> None:
    """A registered objective without model_type is built once from this recipe's config as the
    config is read: on the meta device (shapes only: no memory, no random draws), and where that
    fails, for real on the CPU with the random state kept, so code that cannot run on meta is not
    refused. The page's BertModel objective without model_type="bert" on configs/pretrain-tiny.toml died with
    an AttributeError traceback after the tokenizer and the shards were built (session 30)."""
    objective = cfg.objective
    if objective.model_type or cfg.model.get("init") or any(objective is known for known in BUILT_IN):
        return
    with model_section_errors():
        config = model_config(cfg, _vocab_size_at_config_time(cfg), 0)
    try:
        with torch.device("meta"):
            objective.build_model(config, cfg.objective_settings)
        return
    except Exception:  # the user's code on meta tensors: said only if the CPU build fails too
        pass
    try:
        with torch.random.fork_rng(devices=[]):
            objective.build_model(config, cfg.objective_settings)
    except Exception as e:  # the user's module, whatever it raises on this config
        raise ConfigError(
            f"data.objective = \"{cfg.data.objective}\" cannot build its model from this recipe's "
            f"{config.model_type!r} config ({type(e).__name__}: {e}); if its module is written for one model "
            "family, name it where the objective is registered (Objective(..., model_type=\"bert\") for a "
            "BertModel) and pre-train with a recipe of that family (configs/pretrain-tiny-bert.toml), or set "
            "model.model_type; docs/objectives.md") from e


def _vocab_size_at_config_time(cfg: PretrainConfig) -> int:
    """The vocabulary the run's model will embed, as far as the config tells: tokenizer.path's
    tokenizer when it loads (its size, not tokenizer.vocab_size, which only a trained one uses), else
    the size asked for. A path that does not load is refused later, by the tokenizer step, in its terms."""
    if cfg.tokenizer.path:
        try:
            return vocab_size_of(Tokenizer.from_pretrained(cfg.tokenizer.path))
        except Exception:  # whatever a bad path raises: tokenizer_and_config names it
            pass
    return cfg.tokenizer.vocab_size


def _check_early_stopping_metric(cfg: PretrainConfig) -> None:
    """`[early_stopping] metric` among the held-out metrics the objective names (with
    data.general_corpus also their general_ forms), before any work: a misspelt one was refused
    only at the first evaluation (walk V). An objective naming none is checked there."""
    known = list(cfg.objective.metrics)
    if not cfg.early_stopping.patience or not known:
        return
    if cfg.data.general_corpus:
        known += [f"general_{name}" for name in known]
    metric = cfg.early_stopping.metric
    if metric not in known:
        raise ConfigError(f"early_stopping.metric {metric!r} is not a held-out metric of data.objective = "
                          f"\"{cfg.data.objective}\"; {suggest(metric, known, '')} (it measures {', '.join(known)})")


def _start_evaluated(train: dict, model: dict) -> dict:
    """Continued pre-training (model.init) evaluates before its first step unless told otherwise:
    the held-out loss the checkpoint brings is what the run's later numbers are read against."""
    if model.get("init") and "eval_at_start" not in train:
        return {**train, "eval_at_start": True}
    return train


def load_config(path: str, overrides: Sequence[Override] = ()) -> PretrainConfig:
    return parse_config(load_toml(path), overrides)


# ---------------------------------------------------------------------------- building blocks
@contextlib.contextmanager
def model_section_errors():
    """A bad [model] value's ConfigError, said as the recipe's (not config.json's) to fix."""
    try:
        yield
    except ConfigError as e:
        raise ConfigError(f"[model] {e}".replace("; fix it in config.json", "")) from None


def tokenizer_and_config(cfg: PretrainConfig, corpus: CorpusDocuments, out_dir: str, ctx):
    """(tokenizer, model config): the configured tokenizer, the checkpoint's (model.init), or one
    trained on the corpus and saved to OUT/tokenizer; and the model config built once for its
    vocabulary (None with model.init: the checkpoint's). A tokenizer trained here is saved only
    once the config is built, so a bad [model] value stops the run before anything is written."""
    def configure(tokenizer):
        if cfg.model.get("init"):
            return None
        with model_section_errors():
            return with_tokenizer_ids(model_config(cfg, vocab_size_of(tokenizer), tokenizer.pad_token_id),
                                      tokenizer, cfg.model)

    # Continued pre-training keeps the checkpoint's vocabulary (its embeddings are indexed by it),
    # unless tokenizer.extend_vocab adds words after its ids.
    given = cfg.tokenizer.path or cfg.model.get("init", "")
    if not given:  # the [model] values checked before a tokenizer is trained (minutes on a large
        with model_section_errors():  # corpus), at the vocabulary size asked for
            model_config(cfg, cfg.tokenizer.vocab_size, 0)
    if given and not cfg.tokenizer.extend_vocab:
        tokenizer = Tokenizer.from_pretrained(given)
        return tokenizer, configure(tokenizer)
    directory = os.path.join(out_dir, "tokenizer")
    origin = {**shard_origin(corpus.source, corpus.opened(), corpus.max_documents),
              "tokenizer": dataclasses.asdict(cfg.tokenizer), **({"init": given} if given else {})}
    config = None
    # A resumed run must see exactly the vocabulary it started with: reuse the saved one. One a
    # failed run left before any checkpoint used it is reused only if made from the same data.
    if not latest_checkpoint(out_dir):
        if ctx.is_main:
            drop_stale_tokenizer(directory, origin)
        ctx.barrier()  # the other ranks look at the directory only after it is settled
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        if ctx.is_main:
            if not given:  # minutes on a large corpus, before any other line: say what runs
                print(f"pretrain: training a {cfg.tokenizer.kind} tokenizer of {cfg.tokenizer.vocab_size:,} tokens "
                      f"on data.corpus", flush=True)
            made = extend_tokenizer(given, cfg.tokenizer, corpus) if given else train_tokenizer(cfg.tokenizer, corpus)
            config = configure(made)
            made.save_pretrained(directory)
            atomic_write_json(os.path.join(directory, TOKENIZER_ORIGIN), origin)
        ctx.barrier()
    tokenizer = Tokenizer.from_pretrained(directory)
    if tokenizer.kind != cfg.tokenizer.kind:
        raise ConfigError(f"{directory} holds a {tokenizer.kind} tokenizer but tokenizer.kind = "
                          f"{cfg.tokenizer.kind!r}; keep the kind the run started with, or use a new --out")
    return tokenizer, config if config is not None else configure(tokenizer)


def extend_tokenizer(init: str, section: TokenizerSection, corpus: CorpusDocuments) -> Tokenizer:
    """The tokenizer of `init` with up to `section.extend_vocab` words of the corpus added
    (tokenizer/extend.py), and one line saying what they save."""
    tokenizer = Tokenizer.from_pretrained(init)
    rows = read_config(init).vocab_size
    if rows != vocab_size_of(tokenizer):  # the new words' ids must be the rows right after the old ones
        raise ConfigError(f"{init} embeds {rows} rows but its tokenizer has {vocab_size_of(tokenizer)} ids; "
                          "tokenizer.extend_vocab needs the two equal: --set tokenizer.extend_vocab=0")
    extension = words_to_add(tokenizer, corpus.lines(), section.extend_vocab, section.min_frequency)
    if not extension.words:  # every frequent word is already one piece, or none is frequent enough
        print(f"pretrain: no word of data.corpus added to the {len(tokenizer)} pieces of {init}: none that "
              f"occurs {section.min_frequency}+ times splits into several pieces (tokenizer.min_frequency)",
              flush=True)
        return extended(tokenizer, [])
    saved = 1 - extension.tokens_after / extension.tokens_before
    grown = extended(tokenizer, extension.words)
    # byte-level BPE: a word is spelt "Ġkmalloc" and adds up to pieces - 1 ids, the merges that build it
    examples = ", ".join(grown.decode(grown.convert_tokens_to_ids([w.word])).strip() for w in extension.words[:5])
    added = len(grown) - len(tokenizer)
    ids = f" as {added} new tokens (the merges that build them)" if added != len(extension.words) else ""
    print(f"pretrain: {len(extension.words)} words of data.corpus added to the {len(tokenizer)} pieces of {init}"
          f"{ids} (e.g. {examples}): the corpus's words take {saved:.1%} fewer tokens ({extension.tokens_before} -> "
          f"{extension.tokens_after})", flush=True)
    return grown


def drop_stale_tokenizer(directory: str, origin: dict) -> None:
    """Remove OUT/tokenizer when it was trained on other data or settings than `origin` (what
    TOKENIZER_ORIGIN beside it records), with a note naming what changed."""
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        return
    refuse_foreign_tokenizer(directory)
    try:
        changes = origin_changes(read_json_object(os.path.join(directory, TOKENIZER_ORIGIN), "it is trained again"),
                                 origin)
    except BertkitError:  # a pretrain run's record, damaged: its tokenizer is retrained like a stale one
        changes = f"its {TOKENIZER_ORIGIN} is unreadable"
    if changes is not None:
        warnings.warn(f"{directory} was trained on other data ({changes}); training it again")
        shutil.rmtree(directory)


def refuse_foreign_tokenizer(directory: str) -> None:
    """A tokenizer in OUT/tokenizer without a pretrain run's record (TOKENIZER_ORIGIN) is the
    user's (`bertkit tokenizer train --out OUT/tokenizer`): refused, never deleted and retrained
    (walk O #1 lost one so, with a warning blaming an older bertkit)."""
    if os.path.isfile(os.path.join(directory, "tokenizer.json")) and \
            not os.path.isfile(os.path.join(directory, TOKENIZER_ORIGIN)):
        raise ConfigError(f"{directory} holds a tokenizer that no pretrain run made (it has no {TOKENIZER_ORIGIN}), "
                          f"and a pretrain run keeps its own there: to pre-train with it, --set "
                          f"tokenizer.path={directory}; else move it or give another --out")


def train_tokenizer(section: TokenizerSection, corpus: CorpusDocuments) -> Tokenizer:
    """A tokenizer of `section`'s kind trained on the corpus as read by `Corpus` (which skips
    binary/non-UTF-8 files with a warning), not on its raw files: one sentence per line."""
    if section.kind == "bpe":
        # Sentences are tokenized one at a time and then packed, so every sentence
        # starts with a space token, as a word inside running text does.
        tokenizer = Tokenizer.train_bpe(texts=corpus.lines(), vocab_size=section.vocab_size,
                                        min_frequency=section.min_frequency, add_prefix_space=True,
                                        show_progress=False)
    else:
        tokenizer = Tokenizer.train_wordpiece(texts=corpus.lines(), vocab_size=section.vocab_size,
                                              min_frequency=section.min_frequency,
                                              lowercase=section.lowercase is not False, show_progress=False)
    if tokenizer.vocab_size > section.vocab_size:  # every character (byte) of the text is a token
        warnings.warn(f"tokenizer.vocab_size={section.vocab_size} is below the text's alphabet and the special "
                      f"tokens: the vocabulary has {tokenizer.vocab_size} tokens")
    small = small_vocabulary(tokenizer.vocab_size, section.vocab_size, section.min_frequency,
                             "tokenizer.min_frequency")
    if small:  # the model is built for the vocabulary it got: said, not refused
        warnings.warn(f"data.corpus: {small}")
    return tokenizer


def refuse_other_family_keys(model: dict, family, from_recipe: set = frozenset()) -> None:
    """A [model] key only another family has (BERT's model.num_experts in the other family's
    recipe, that family's local_attention under model_type "deberta-v2") is refused by name: it
    would be unknown, or kept in config.json and never read. `from_recipe`: the keys the recipe
    file set (not --set): a recipe of one family given another model_type is told to change recipe."""
    for key in model:
        owners = [other for other in families() if other is not family and key in other.recipe_keys]
        if key not in family.recipe_keys and owners:
            owner, run_type = owners[0], model.get("model_type", "bert")
            setting = f"a setting of the {owner.name} family (model_type {', '.join(owner.model_types)})"
            if key in from_recipe:
                raise ConfigError(f"the recipe sets model.{key}, {setting}; model_type {run_type!r} is of the "
                                  f"{family.name} family: start from a recipe of the {family.name} family, or "
                                  f"remove model.{key} from the recipe")
            raise ConfigError(f"model.{key} is {setting}; this run's model_type {run_type!r} is of the "
                              f"{family.name} family: remove model.{key}, or start from a recipe of the "
                              f"{owner.name} family")


def with_tokenizer_ids(config, tokenizer, model_section: dict):
    """`config` with the tokenizer's [CLS] and [SEP] ids (also as bos / eos) in the fields it has and
    [model] leaves unset: a size preset carries bertkit WordPiece's (2, 3), which a BPE tokenizer
    (0, 2) does not share, and config.json would name other tokens than the tokenizer beside it."""
    ids = {"cls_token_id": tokenizer.cls_token_id, "sep_token_id": tokenizer.sep_token_id,
           "bos_token_id": tokenizer.cls_token_id, "eos_token_id": tokenizer.sep_token_id}
    fields = {f.name for f in dataclasses.fields(config)}
    changes = {name: value for name, value in ids.items()
               if name in fields and name not in model_section and value is not None and getattr(config, name) != value}
    return config.replace(**changes) if changes else config


def model_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int | None = None):
    """The model's config, built by the family `model.model_type` names (bertkit/models/families.py):
    the preset and family defaults, [model] overrides, the tokenizer's vocabulary size and pad id,
    and room for data.max_length tokens."""
    overrides = {k: v for k, v in cfg.model.items() if k != "preset"}
    family = family_for(overrides.get("model_type", "bert"))
    return family.config_from_recipe(overrides, cfg.model["preset"], vocab_size, pad_token_id, cfg.data.max_length)


def check_segments(data: DataSection, config, tokenizer_kind: str) -> None:
    """BERT's pair template gives the second segment token_type_id 1: the model needs 2 rows."""
    if not family_of(config).has_segments:
        if BUILDERS[data.builder].needs_pairs:
            raise ConfigError(f"data.objective {data.objective} needs segment embeddings, which the "
                              f"{config.model_type} encoder does not have; use data.objective = \"mlm\"")
        return
    if BUILDERS[data.builder].needs_pairs and tokenizer_kind == "wordpiece" and config.type_vocab_size == 1:
        raise ConfigError(f"data.objective {data.objective} marks the second segment with token type 1, "
                          f"but the model has type_vocab_size=1 ({config.model_type}); use tokenizer.kind = "
                          "\"bpe\" (RoBERTa's pair template: all type ids 0) or model.type_vocab_size = 2")


def build_model(cfg: PretrainConfig, vocab_size: int, pad_token_id: int | None = None, config=None):
    """The module the objective trains, new or (model.init) on a trained encoder; `config`: the
    model config the run built for this vocabulary (`tokenizer_and_config`), else built here."""
    objective = cfg.objective
    if cfg.model.get("init"):  # continued pre-training from a checkpoint (continued.py)
        if not objective.init_from_checkpoint:
            raise ConfigError(f"model.init continues MLM (or MLM+NSP/SOP) pre-training; the {cfg.data.objective} "
                              "objective starts from scratch: remove model.init or change the objective")
        model, model.init_info = load_init_model(
            cfg.model, lambda config: objective.build_model(config, cfg.objective_settings), vocab_size,
            cfg.data.max_length, pad_token_id)
        return model
    if config is None:
        config = model_config(cfg, vocab_size, pad_token_id)
    return objective.build_model(config, cfg.objective_settings)


def logged_outputs(objective: Objective, model) -> dict[str, str]:
    """The parts of the objective the Trainer averages into the train rows besides the loss:
    {row key: field of the model's output}."""
    names = dict(objective.logged)
    if getattr(model.config, "num_experts", 0):
        names["aux_loss"] = "aux_loss"  # the MoE load-balancing term (already inside the loss)
    return names


# ---------------------------------------------------------------------------- the data
@dataclass
class PretrainData:
    """What the Trainer and the evaluations read: the token documents and their split, the
    training batches (and the object whose state resumes them), held-out batches."""

    docs: object  # ShardedCorpus
    train_docs: object  # np.ndarray of document indices
    batches: object  # LengthBucketedBatches, or the streaming batches
    data_state: object  # saved in checkpoints: the collator, or the stream (position + collator)
    eval_batches: list
    general_eval_batches: list  # held-out general text: the forgetting monitor
    num_train_examples: int | None  # None when streamed
    num_eval_examples: int
    num_general_examples: int = 0  # of num_train_examples, those of data.general_corpus


def build_data(d: DataSection, t: TrainConfig, objective: Objective, tokenizer, corpus: CorpusDocuments,
               out_dir: str, ctx: DistContext, progress: bool = False) -> PretrainData:
    """Shards of `corpus` -> train/held-out documents -> examples -> batches collated by the objective."""
    docs = shard_documents(corpus, tokenizer, os.path.join(out_dir, "shards"), is_main=ctx.is_main,
                           barrier=ctx.barrier, progress=progress)
    train_docs, eval_docs = split_documents(len(docs), d.eval_fraction, t.seed)
    rules = cleaning_rules(d)
    docs, train_docs = clean_training(rules, "corpus", docs, train_docs, eval_docs, tokenizer, out_dir, ctx.is_main)
    builder = make_builder(d.builder, d.max_length, SpecialTokens.from_tokenizer(tokenizer))
    general = open_general(d, t.seed, tokenizer, out_dir, ctx, progress)  # None without data.general_corpus
    if general is not None:
        general.docs, general.train_docs = clean_training(rules, "general_corpus", general.docs, general.train_docs,
                                                          general.eval_docs, tokenizer, out_dir, ctx.is_main)
    if d.streaming:  # examples are built lazily, a block of documents at a time
        train_examples, mixed = None, 0
        eval_examples = take_examples(builder, docs, eval_docs, random.Random(t.seed + 1), d.max_eval_examples)
    else:
        train_examples, eval_examples, mixed = _examples_in_memory(d, t.seed, builder, docs, train_docs, eval_docs,
                                                                   general)

    def collator(seed: int):
        return objective.collator(tokenizer, d, seed)

    train_collator = collator(t.seed + 1000 * ctx.rank)
    if d.streaming:
        # The stream's state (data position + the collator's RNG) is what the Trainer saves.
        batches = streaming_batches(builder, docs, train_docs, t.batch_size, train_collator, t.seed,
                                    ctx.rank, ctx.world_size, d.block_docs, general, d.general_fraction)
        data_state = batches
    else:
        batches = LengthBucketedBatches(train_examples, t.batch_size, train_collator, seed=t.seed,
                                        bucket_size=d.bucket_size, rank=ctx.rank, world_size=ctx.world_size)
        data_state = train_collator
    # Held-out batches are collated once, with their own seed: every evaluation sees the same task.
    eval_batches = _fixed_batches(eval_examples, t.batch_size, collator(t.seed + 99991))
    general_eval_batches = []
    if general is not None:
        general_eval = take_examples(builder, general.docs, general.eval_docs, random.Random(t.seed + 3),
                                     d.max_eval_examples)
        general_eval_batches = _fixed_batches(general_eval, t.batch_size, collator(t.seed + 99992))
    return PretrainData(docs, train_docs, batches, data_state, eval_batches, general_eval_batches,
                        None if train_examples is None else len(train_examples), len(eval_examples), mixed)


def cleaning_rules(data: DataSection) -> CleaningRules:
    return CleaningRules(data.dedup, data.min_words, data.min_alpha_fraction)


def clean_training(rules: CleaningRules, which: str, docs, train_docs, eval_docs, tokenizer, out_dir: str,
                   is_main: bool):
    """(docs, train_docs) after data.dedup / min_words / min_alpha_fraction (data/cleaning.py; the
    held-out documents are untouched); what was dropped is printed and saved in OUT/cleaning.json."""
    if not rules.active:
        return docs, train_docs
    cleaned = clean_documents(docs, train_docs, eval_docs, rules, tokenizer.batch_decode)
    if is_main:
        path = os.path.join(out_dir, "cleaning.json")
        report = loads_json(read_text(path), path) if os.path.isfile(path) else {}
        atomic_write_json(path, {**report, which: cleaned.stats})
        s = cleaned.stats
        print(f"pretrain: cleaning data.{which}: {s['kept_documents']} of {s['train_documents']} training documents "
              f"kept ({s['duplicate_documents']} duplicates, {s['held_out_copies']} of them of held-out ones, "
              f"{s['emptied_documents']} emptied), "
              f"{s['filtered_sentences']} sentences filtered, {s['kept_tokens']} of {s['train_tokens']} tokens kept",
              flush=True)
    return cleaned.docs, cleaned.train_docs


def _examples_in_memory(data: DataSection, seed: int, builder, docs, train_docs, eval_docs,
                        general: GeneralCorpus | None) -> tuple[list, list, int]:
    """(train, held-out) examples, fixed for the run like BERT's static data (the masks are
    not), and how many of the train ones are general text (mixed in as data.general_fraction says)."""
    train_examples = build_examples(builder, docs, train_docs, random.Random(seed))
    eval_examples = build_examples(builder, docs, eval_docs, random.Random(seed + 1))
    eval_examples = eval_examples[: data.max_eval_examples]
    if general is not None and data.general_fraction:
        general_examples = build_examples(builder, general.docs, general.train_docs, random.Random(seed + 2))
        own = len(train_examples)
        train_examples = mix_examples(train_examples, general_examples, data.general_fraction, seed)
        return train_examples, eval_examples, len(train_examples) - own
    return train_examples, eval_examples, 0


def _fixed_batches(examples: list, batch_size: int, collate) -> list:
    """Batches collated once, in order: the held-out set every evaluation reads."""
    return list(LengthBucketedBatches(examples, batch_size, collate, shuffle=False)) if examples else []


# ---------------------------------------------------------------------------- the recipe
def vocab_size_of(tokenizer) -> int:
    """Rows the embedding needs: the largest id + 1 (added tokens can leave gaps)."""
    return max(tokenizer.get_vocab().values()) + 1


def make_model(cfg: PretrainConfig, tokenizer, config=None):
    """The model (of `config`, the run's model config, if given), initialised from train.seed: the
    same weights on every rank and every run."""
    seed_everything(cfg.train.seed)
    if not cfg.tokenizer.extend_vocab:
        model = build_model(cfg, vocab_size_of(tokenizer), tokenizer.pad_token_id, config)
    else:  # the checkpoint as it is, then a row for each word added to its vocabulary
        old_size = read_init_config(cfg.model).vocab_size
        model = build_model(cfg, old_size, tokenizer.pad_token_id, config)
        model.init_info["added_words"] = grow_vocabulary(model, tokenizer, old_size)
    check_segments(cfg.data, model.config, tokenizer.kind)
    return model


MANY_PASSES = 50  # from scratch, more reads of each example than this mostly memorise it
FEW_HELD_OUT = 50  # held-out examples below which a score moves by points from chance alone


def small_corpus_note(model_section: dict, train: TrainConfig, data: PretrainData, world_size: int) -> str | None:
    """A line for a from-scratch run on little text: how often it reads each training example and
    how few held-out examples score it (None when neither is a concern). Continued pre-training
    (model.init: TAPT reads a small set many times on purpose), streamed data and runs bounded by
    the clock (max_steps only a bound) get none."""
    if model_section.get("init") or not data.num_train_examples or train.max_minutes is not None:
        return None
    rows_per_step = train.batch_size * train.grad_accum * world_size
    passes = train.max_steps * rows_per_step / data.num_train_examples
    notes = []
    if passes > MANY_PASSES:
        notes.append(f"{train.max_steps:,} steps of {rows_per_step} rows read each of the "
                     f"{data.num_train_examples:,} training examples about {passes:.0f} times, so the model will "
                     "memorise them (training loss far under the held-out loss); more text (a larger data.corpus, "
                     "or data.general_corpus) or fewer steps (--set train.max_steps=...) fits it better")
    if 0 < data.num_eval_examples < FEW_HELD_OUT:
        notes.append(f"the held-out scores rest on {data.num_eval_examples} examples: a few points of difference "
                     "between runs are noise")
    return "pretrain: note: " + "; ".join(notes) if notes else None


def report_start(model_section: dict, data_section: DataSection, model, data: PretrainData) -> None:
    """One line on the model and the data, and one on a newly created MLM head."""
    source = model_section.get("init") or model_section["preset"]
    described = (f"streamed examples (blocks of {data_section.block_docs} documents)" if data_section.streaming else
                 f"{data.num_train_examples} train examples{general_share(data_section, data)}, "
                 f"{len(data.batches)} batches per epoch per "
                 f"rank, padding {data.batches.padding_fraction():.1%}")
    print(f"pretrain: {type(model).__name__} {source} ({model.num_parameters() / 1e6:.2f}M params), "
          f"{len(data.docs)} documents, {described}, {data.num_eval_examples} held-out examples", flush=True)
    if getattr(model, "init_info", None) and model.init_info["new_head_weights"]:
        print(f"pretrain: new MLM head ({model_section.get('head_init', 'identity')} init) on "
              f"the encoder of {model_section['init']}", flush=True)


def general_share(data_section: DataSection, data: PretrainData) -> str:
    """How many of the train examples are data.general_corpus's (walk O #2: counted unsaid)."""
    if not data.num_general_examples:
        return ""
    return f" ({data.num_general_examples} of them from data.general_corpus={data_section.general_corpus})"


def write_baseline(data: PretrainData, tokenizer, out_dir: str) -> None:
    """OUT/baseline.json: the context-free score (most frequent token, unigram loss) that the
    held-out MLM metrics must beat."""
    baseline = unigram_baseline(data.docs, data.train_docs, data.eval_batches, vocab_size_of(tokenizer),
                                tokenizer.all_special_ids)
    if not baseline:
        return
    baseline["most_frequent_token"] = tokenizer.convert_ids_to_tokens(baseline["most_frequent_token_id"])
    atomic_write_json(os.path.join(out_dir, "baseline.json"), baseline)
    shown = display_tokens(tokenizer, [baseline["most_frequent_token_id"]])[0]  # byte-level BPE: '▁the', not 'Ġthe'
    print(f"pretrain: held-out baseline without context: most frequent token "
          f"{shown!r} is {baseline['most_frequent_token_accuracy']:.1%} "
          f"of the masks; unigram loss {baseline['unigram_loss']:.2f}", flush=True)


def evaluation(objective: Objective, data: PretrainData, seed: int):
    """eval_fn for the Trainer: the objective's metrics on the held-out batches, and on the
    held-out general text (prefixed general_) when there is some."""
    def eval_fn(model) -> dict:
        metrics = objective.evaluate(model, data.eval_batches, seed) if data.eval_batches else {}
        if data.general_eval_batches:
            general = objective.evaluate(model, data.general_eval_batches, seed)
            metrics.update({f"general_{k}": v for k, v in general.items()})
        return metrics

    return eval_fn


def run_pretraining(cfg: PretrainConfig, out_dir: str, resume: bool = False, progress: bool = True) -> dict:
    """Pre-train as configured; returns the final evaluation metrics."""
    ctx = init_distributed(cfg.train.device)
    cfg.train.precision_on(ctx.device)  # fp16 without a GPU: refused before the corpus is read
    os.makedirs(out_dir, exist_ok=True)
    objective = cfg.objective
    # A tokenizer trained (or extended) here and the shards read the documents once (kept in memory
    # between the two), unless streamed (data.streaming: read at each use, never held whole).
    reads_text = cfg.tokenizer.extend_vocab > 0 or not (cfg.tokenizer.path or cfg.model.get("init"))
    corpus = CorpusDocuments(cfg.data.corpus, cfg.data.mode, cfg.data.max_documents,
                             keep=reads_text and not cfg.data.streaming, text_field=cfg.data.text_field)
    tokenizer, config = tokenizer_and_config(cfg, corpus, out_dir, ctx)
    data = build_data(cfg.data, cfg.train, objective, tokenizer, corpus, out_dir, ctx, progress)
    del corpus  # the shards hold the documents now: their text is not kept while training
    model = make_model(cfg, tokenizer, config)
    if ctx.is_main:
        atomic_write_json(os.path.join(out_dir, RUN_FILE), cfg.to_dict())
        report_start(cfg.model, cfg.data, model, data)  # the run's report: printed with or without the bar
        note = small_corpus_note(cfg.model, cfg.train, data, ctx.world_size)
        if note:
            print(note, flush=True)
        if objective.unigram_baseline and data.eval_batches:
            write_baseline(data, tokenizer, out_dir)
    trainer = Trainer(model, data.batches, cfg.train, out_dir, eval_fn=evaluation(objective, data, cfg.train.seed),
                      collator=data.data_state, tokenizer=tokenizer, ctx=ctx, progress=progress,
                      log_outputs=logged_outputs(objective, model), keeper=cfg.early_stopping.keeper(out_dir, tokenizer))
    torch.set_float32_matmul_precision("high")  # TF32 on GPUs that have it; no effect on CPU
    metrics = trainer.train(resume=resume)
    keeper = trainer.keeper
    if keeper is not None and keeper.best_step is not None:  # OUT/best is not the last step's model
        kept = {name: value for name, value in keeper.best_metrics.items() if name in (keeper.metric, "mlm_loss")}
        metrics = {**metrics, "best_step": keeper.best_step, **{f"best_{name}": value for name, value in kept.items()}}
    if metrics and trainer.step < cfg.train.max_steps and not trainer.stop_requested:  # the clock ended it
        metrics = {**metrics, "stopped_by_clock_at": trainer.step}
    return metrics


def check_run_dir(cfg: PretrainConfig, out_dir: str, resume: bool) -> None:
    """Before any work: a run in `out_dir` is continued only with --resume, and only with the
    options it was started with (OUT/pretrain_config.json; see runtime/resume_check.py)."""
    if cfg.model.get("init"):
        check_apart(cfg.model["init"], out_dir, "model.init")
    check_corpora(cfg.data, out_dir)
    check_shard_tokenizer(cfg)
    existing = latest_checkpoint(out_dir)
    if not existing and (cfg.tokenizer.extend_vocab or not (cfg.tokenizer.path or cfg.model.get("init"))):
        refuse_foreign_tokenizer(os.path.join(out_dir, "tokenizer"))  # before the corpus is opened: see walk O #1
    for name, key in (("shards", "corpus"), ("general-shards", "general_corpus")):
        given = getattr(cfg.data, key)
        if not (isinstance(given, str) and given and same_path(given, os.path.join(out_dir, name))):
            refuse_prepared_shards(os.path.join(out_dir, name), f"data.{key}")  # the user's: see walk O
    refuse_unresumed(out_dir, existing, resume)
    if existing:
        check_saved_options(out_dir, RUN_FILE, cfg.to_dict(), defaults=parse_config({}).to_dict())
    elif resume:
        warn_resuming_from_scratch(out_dir, reused="a tokenizer and shards it finished are reused")


def check_corpora(data: DataSection, out_dir: str) -> None:
    """What the run's corpora would fail on only after the tokenizer and shards are built: --out
    inside a corpus folder (the run's files would be read as text), one text file read whole (one
    document), a general corpus that cannot be opened (read only after the shards)."""
    for key, source in (("corpus", data.corpus), ("general_corpus", data.general_corpus)):
        if source and os.path.isdir(source):
            check_apart(source, out_dir, f"data.{key}", inside_only=True)
    check_document_count(data.corpus, data.mode)  # one text file: empty, gzip, or one document read whole
    if data.general_corpus and not is_shard_directory(data.general_corpus):  # shards hold token ids, no text
        try:
            open_corpus(data.general_corpus, data.mode)
        except DataError as err:
            raise ConfigError(f"data.general_corpus: {err}; or leave general text out with --set "
                              "'data.general_corpus=\"\"'") from None


def check_shard_tokenizer(cfg: PretrainConfig) -> None:
    """Shards from `bertkit prepare` hold token ids, not text: the run must read them with the
    tokenizer they were made with, not train (or extend) one on them."""
    if not (isinstance(cfg.data.corpus, str) and is_shard_directory(cfg.data.corpus)):
        return
    if cfg.tokenizer.extend_vocab:
        raise ConfigError(f"data.corpus {cfg.data.corpus} holds prepared token ids, and tokenizer.extend_vocab "
                          "needs the text: set data.corpus to the text files, or --set tokenizer.extend_vocab=0")
    if not (cfg.tokenizer.path or cfg.model.get("init")):
        raise ConfigError(f"data.corpus {cfg.data.corpus} holds token ids prepared by bertkit prepare; name the "
                          "tokenizer they were prepared with: --set tokenizer.path=DIR (the --tokenizer given to "
                          "bertkit prepare)")


def pretrain(config_path: str, out_dir: str, overrides: Sequence[Override] = (), resume: bool = False,
             progress: bool = True) -> dict:
    """What `bertkit pretrain` runs: the TOML recipe with `--set` overrides, pre-trained into
    `out_dir`; the process group (under torchrun) is left at the end, also on errors."""
    return run_and_leave(load_config(config_path, overrides), out_dir, resume=resume, progress=progress,
                         what=f"pretrain --config {config_path}")


def run_and_leave(cfg: PretrainConfig, out_dir: str, resume: bool = False, progress: bool = True,
                  what: str = "pretrain") -> dict:
    """`run_pretraining` holding the lock of `out_dir` (bertkit.runtime.run_dir; `what` names the run to
    another one refused), after `check_run_dir`; then leave the process group (under torchrun),
    also on errors."""
    try:
        refuse_nothing_to_resume(out_dir, resume)  # before the lock makes the folder
        with run_lock(out_dir, what):
            check_run_dir(cfg, out_dir, resume)
            metrics = run_pretraining(cfg, out_dir, resume=resume, progress=progress)
    except BaseException:
        shutdown(wait=False)  # a peer may have failed too: do not wait for it
        raise
    shutdown()
    return metrics
