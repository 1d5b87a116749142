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
[data]       corpus ("bbc", "wordnet", a path, or a shard directory), objective
             ("mlm" | "mlm+nsp" | "mlm+sop" | "electra"), builder (for "mlm"/"electra":
             "full_sentences" packs contiguous sentences to max_length, or "doc_sentences"),
             max_length, masking strategy and rate, static_masking, eval_fraction, ...
[electra]    only with objective "electra": generator_hidden_fraction, generator_layers,
             disc_weight (the paper's lambda = 50), temperature (of the generator's sampling)
[train]      the TrainConfig fields (max_steps, lr, batch_size, seed, ...)
[early_stopping]  patience (evaluations without improvement; 0 = off), min_delta, metric
             (held-out, default mlm_loss): stop early, best model kept in OUT/best (early_stopping.py)

Objectives -> model: "mlm" BertForMaskedLM; "mlm+nsp" / "mlm+sop" BertForPreTraining (with
model_type "albert" its second head is ALBERT's sentence-order head); "electra"
`ElectraPretrainer` (a small generator + the discriminator, sharing embeddings). Besides the
loss, the train rows of metrics.jsonl carry the parts of the objective: mlm_loss / nsp_loss,
generator_loss / discriminator_loss, and aux_loss (the MoE load-balancing term) when the model
has experts.

Steps: documents are tokenized once into memory-mapped shards (OUT/shards); documents are
split into train/held-out by a seeded shuffle; examples are built by the data package's
builders; batches group similar lengths (`LengthBucketedBatches`) and are masked dynamically by
`MLMCollator`; held-out batches are masked once with a fixed seed so evaluations compare.

Continued pre-training (DAPT/TAPT, `continued.py`): [model] init = a trained model directory
(its encoder and tokenizer; a missing MLM head is created: head_init, freeze_encoder);
[data] general_corpus / general_fraction mix in and evaluate general text, masking =
"keyword" with keywords / keyword_probability. Streaming (`streaming.py`): [data] streaming =
true builds examples lazily per block of block_docs documents (corpora larger than memory),
with the data position saved in every checkpoint. See docs/dapt.md.
"""

from __future__ import annotations

import dataclasses
import os
import random
from dataclasses import dataclass, field

import numpy as np

from ..config import SIZE_PRESETS, BertConfig
from ..errors import ConfigError
from ..io import atomic_open, atomic_write_json
from .config_io import apply_overrides, check_keys, dataclass_from_dict, load_toml, suggest
from .early_stopping import EarlyStoppingSection
from .trainer import TrainConfig

# objective -> the sentence-pair task its examples carry (None: single packed sequences)
OBJECTIVES = {"mlm": None, "mlm+nsp": "nsp", "mlm+sop": "sop", "electra": None}
MLM_BUILDERS = ("full_sentences", "doc_sentences")
TOKENIZER_KINDS = ("wordpiece", "bpe")


@dataclass
class TokenizerSection:
    path: str = ""  # an existing tokenizer (or model) directory; empty = train one
    kind: str = "wordpiece"  # "wordpiece" (BERT, [PAD]=0) | "bpe" (RoBERTa's byte-level BPE, <pad>=1)
    vocab_size: int = 8000
    min_frequency: int = 2
    lowercase: bool | None = None  # WordPiece: None = True (uncased); byte-level BPE keeps case

    def __post_init__(self):
        if self.kind not in TOKENIZER_KINDS:
            raise ConfigError(f"tokenizer.kind {self.kind!r} is not known; use one of "
                              f"{', '.join(TOKENIZER_KINDS)}")
        if self.kind == "bpe" and self.lowercase:
            raise ConfigError("tokenizer.lowercase does not apply to kind \"bpe\" (byte-level BPE keeps "
                              "case, as RoBERTa's); remove tokenizer.lowercase or use kind \"wordpiece\"")


@dataclass
class ElectraSection:
    """[electra]: the generator of ELECTRA's replaced-token detection (bertkit/variants/electra.py)."""

    generator_hidden_fraction: float = 0.25  # generator width / discriminator width (paper: 1/4)
    generator_layers: int = 0  # 0 = as many layers as the discriminator
    disc_weight: float = 50.0  # lambda: loss = generator MLM loss + lambda * replaced-token BCE
    temperature: float = 1.0  # of the generator's softmax when sampling replacements

    def __post_init__(self):
        if not 0.0 < self.generator_hidden_fraction <= 1.0:
            raise ConfigError(f"electra.generator_hidden_fraction must be in (0, 1], got "
                              f"{self.generator_hidden_fraction}")
        if not isinstance(self.generator_layers, int) or self.generator_layers < 0:
            raise ConfigError(f"electra.generator_layers must be an integer >= 0 (0 = as many as the "
                              f"discriminator), got {self.generator_layers!r}")
        if self.disc_weight <= 0 or self.temperature <= 0:
            raise ConfigError(f"electra.disc_weight and electra.temperature must be > 0, got "
                              f"{self.disc_weight} and {self.temperature}")


@dataclass
class DataSection:
    corpus: str = "bbc"
    mode: str = "file"  # how text files split into documents: "file" | "blank" | "jsonl"
    objective: str = "mlm"
    builder: str = ""  # empty: full_sentences for mlm, nsp/sop for the pair objectives
    max_length: int = 128
    masking: str = "token"  # "token" | "whole_word" | "span" | "keyword"
    mlm_probability: float = 0.15
    static_masking: bool = False  # True: the same mask every epoch (original BERT)
    eval_fraction: float = 0.05  # share of documents held out
    max_eval_examples: int = 512  # evaluation cost is bounded by this
    max_documents: int = 0  # 0 = the whole corpus; >0 = the first N (quick runs)
    bucket_size: int = 50  # batches per length-sorting chunk
    # Domain-adaptive pre-training (bertkit/train/continued.py) and streaming (streaming.py):
    keywords: list | str = field(default_factory=list)  # masking = "keyword": words or a file
    keyword_probability: float = 0.5  # each keyword occurrence is masked with this probability
    general_corpus: str = ""  # general text: mixed in (general_fraction) and evaluated on
    general_fraction: float = 0.0  # share of training sequences taken from general_corpus
    general_max_documents: int = 0  # 0 = the whole general corpus
    streaming: bool = False  # True: examples built lazily per block (corpora larger than memory)
    block_docs: int = 256  # streaming: documents whose examples are built and shuffled together

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"data.objective {self.objective!r} is not known; "
                              f"use one of {', '.join(OBJECTIVES)}")
        pair = OBJECTIVES[self.objective]
        if not self.builder:
            self.builder = pair or "full_sentences"
        if pair and self.builder != pair:
            raise ConfigError(f"data.objective {self.objective} needs data.builder = \"{pair}\" "
                              f"(got {self.builder!r})")
        if not pair and self.builder not in MLM_BUILDERS:
            raise ConfigError(f"data.builder {self.builder!r} does not fit objective mlm; use one of "
                              f"{', '.join(MLM_BUILDERS)}")
        if not 0.0 < self.eval_fraction < 1.0:
            raise ConfigError(f"data.eval_fraction must be in (0, 1), got {self.eval_fraction}")
        if self.max_length < 8:
            raise ConfigError(f"data.max_length must be at least 8, got {self.max_length}")
        from .continued import check_data_section

        check_data_section(self)


@dataclass
class PretrainConfig:
    model: dict = field(default_factory=lambda: {"preset": "tiny"})
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    electra: ElectraSection | None = None  # set exactly when data.objective = "electra"
    early_stopping: EarlyStoppingSection = field(default_factory=EarlyStoppingSection)

    def to_dict(self) -> dict:
        out = {"model": dict(self.model), "tokenizer": dataclasses.asdict(self.tokenizer),
               "data": dataclasses.asdict(self.data), "train": dataclasses.asdict(self.train),
               "early_stopping": dataclasses.asdict(self.early_stopping)}
        if self.electra is not None:
            out["electra"] = dataclasses.asdict(self.electra)
        return out


def _model_keys() -> list[str]:
    from .continued import INIT_KEYS  # continued pre-training: init, head_init, freeze_encoder

    return ["preset", *INIT_KEYS] + [f.name for f in dataclasses.fields(BertConfig) if f.name != "extra"]


def _sections() -> dict[str, list[str]]:
    return {"model": _model_keys(),
            "tokenizer": [f.name for f in dataclasses.fields(TokenizerSection)],
            "data": [f.name for f in dataclasses.fields(DataSection)],
            "electra": [f.name for f in dataclasses.fields(ElectraSection)],
            "train": [f.name for f in dataclasses.fields(TrainConfig)],
            "early_stopping": [f.name for f in dataclasses.fields(EarlyStoppingSection)]}


def parse_config(raw: dict, overrides: list[str] = ()) -> PretrainConfig:
    """Validate a raw TOML dict (plus `--set` strings) into a PretrainConfig."""
    sections = _sections()
    for name in raw:
        if name not in sections:
            raise ConfigError(f"unknown section [{name}]; {suggest(name, sections)}")
    raw = apply_overrides(raw, overrides, sections)
    model = dict(raw.get("model", {}))
    check_keys(model, sections["model"], "model")
    from .continued import check_model_section

    check_model_section(model)
    model.setdefault("preset", "tiny")  # unused with model.init (the checkpoint fixes the shape)
    if model["preset"] not in SIZE_PRESETS:
        raise ConfigError(f"model.preset {model['preset']!r} is not known; use one of {sorted(SIZE_PRESETS)}")
    data = dataclass_from_dict(DataSection, raw.get("data", {}), "data")
    electra = None
    if data.objective == "electra":
        # ELECTRA's checkpoints (and transformers' Electra* classes) are model_type "electra"
        if model.setdefault("model_type", "electra") != "electra":
            raise ConfigError(f"data.objective = \"electra\" trains an ELECTRA discriminator: set "
                              f"model.model_type = \"electra\" (got {model['model_type']!r})")
        electra = dataclass_from_dict(ElectraSection, raw.get("electra", {}), "electra")
    elif raw.get("electra"):
        raise ConfigError(f"[electra] settings are only used with data.objective = \"electra\" (got "
                          f"{data.objective!r}); remove the [electra] section or change the objective")
    return PretrainConfig(
        model=model,
        tokenizer=dataclass_from_dict(TokenizerSection, raw.get("tokenizer", {}), "tokenizer"),
        data=data,
        train=TrainConfig.from_dict(raw.get("train", {})),
        electra=electra,
        early_stopping=dataclass_from_dict(EarlyStoppingSection, raw.get("early_stopping", {}), "early_stopping"),
    )


def load_config(path: str, overrides: list[str] = ()) -> PretrainConfig:
    return parse_config(load_toml(path), overrides)


# ---------------------------------------------------------------------------- building blocks
def get_tokenizer(cfg: PretrainConfig, corpus, out_dir: str, is_main: bool, ctx):
    """The configured tokenizer, or one trained on the corpus files (saved to OUT/tokenizer)."""
    from ..tokenizer import Tokenizer

    # Continued pre-training keeps the checkpoint's vocabulary: its embeddings are indexed by it.
    path = cfg.tokenizer.path or cfg.model.get("init", "")
    if path:
        return Tokenizer.from_pretrained(path)
    directory = os.path.join(out_dir, "tokenizer")
    # A resumed run must see exactly the vocabulary it started with: reuse the saved one.
    if not os.path.exists(os.path.join(directory, "tokenizer.json")):
        if is_main:
            # Train on the corpus as read by `Corpus` (which skips binary/non-UTF-8 files with a
            # warning) rather than on its raw files: one sentence per line in a scratch file.
            scratch = os.path.join(out_dir, ".tokenizer-corpus.txt")
            with atomic_open(scratch, "w", encoding="utf-8") as f:
                for doc in _first(corpus, cfg.data.max_documents):
                    f.write("\n".join(doc) + "\n")
            t = cfg.tokenizer
            try:
                if t.kind == "bpe":
                    # Sentences are tokenized one at a time and then packed, so every sentence
                    # starts with a space token, as a word inside running text does.
                    tok = Tokenizer.train_bpe([scratch], vocab_size=t.vocab_size,
                                              min_frequency=t.min_frequency, add_prefix_space=True,
                                              show_progress=False)
                else:
                    tok = Tokenizer.train_wordpiece([scratch], vocab_size=t.vocab_size,
                                                    min_frequency=t.min_frequency,
                                                    lowercase=t.lowercase is not False, show_progress=False)
            finally:
                os.unlink(scratch)
            tok.save_pretrained(directory)
        ctx.barrier()
    tok = Tokenizer.from_pretrained(directory)
    if tok.kind != cfg.tokenizer.kind:
        raise ConfigError(f"{directory} holds a {tok.kind} tokenizer but tokenizer.kind = "
                          f"{cfg.tokenizer.kind!r}; keep the kind the run started with, or use a new --out")
    return tok


def get_documents(cfg: PretrainConfig, tokenizer, out_dir: str, is_main: bool, ctx):
    """Tokenized documents (lists of sentence id arrays) via memory-mapped shards."""
    from ..data.corpus import open_corpus
    from ..data.shards import ShardedCorpus, prepare_shards

    source = cfg.data.corpus
    if os.path.isfile(os.path.join(source, "meta.json")):  # already a shard directory
        return ShardedCorpus(source, expected_vocab=tokenizer)
    directory = os.path.join(out_dir, "shards")
    if is_main and not _complete_shards(directory):
        corpus = open_corpus(source, cfg.data.mode)
        prepare_shards(_first(corpus, cfg.data.max_documents), tokenizer, directory,
                       progress=False, resume=os.path.isdir(directory))
    ctx.barrier()
    return ShardedCorpus(directory, expected_vocab=tokenizer)


def _complete_shards(directory: str) -> bool:
    import json

    try:
        with open(os.path.join(directory, "meta.json"), encoding="utf-8") as f:
            return bool(json.load(f).get("complete"))
    except (OSError, ValueError):
        return False


def _first(docs, n: int):
    for i, doc in enumerate(docs):
        if n and i >= n:
            return
        yield doc


def split_documents(n: int, eval_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) document indices from a seeded shuffle; at least one of each."""
    if n < 2:
        raise ConfigError(f"the corpus has {n} document(s); pre-training needs at least 2 "
                          "(one to train on, one to hold out)")
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_eval = min(n - 1, max(1, round(eval_fraction * n)))
    return np.sort(order[n_eval:]), np.sort(order[:n_eval])


def model_config(cfg: PretrainConfig, vocab_size: int, pad_token_id: int | None = None) -> BertConfig:
    """The model's BertConfig: the preset and family defaults, [model] overrides, the tokenizer's
    vocabulary size and pad id, and room in the position table for data.max_length tokens."""
    overrides = {k: v for k, v in cfg.model.items() if k != "preset"}
    overrides.setdefault("vocab_size", vocab_size)
    if overrides["vocab_size"] < vocab_size:
        raise ConfigError(f"model.vocab_size={overrides['vocab_size']} is smaller than the "
                          f"tokenizer's {vocab_size} ids; remove it or raise it")
    if pad_token_id is not None:
        # The embedding's padding row and RoBERTa's position numbering both key on this id.
        if overrides.setdefault("pad_token_id", pad_token_id) != pad_token_id:
            raise ConfigError(f"model.pad_token_id={overrides['pad_token_id']} but the tokenizer pads with "
                              f"id {pad_token_id}; remove model.pad_token_id (it follows the tokenizer)")
    model_type = overrides.get("model_type", "bert")
    # RoBERTa numbers positions from pad_token_id + 1, so pad_token_id + 1 rows come first.
    offset = overrides.get("pad_token_id", 1) + 1 if model_type == "roberta" else 0
    # DeBERTa-v3 adds no absolute positions; its 512 is the far end of the 256 log-buckets.
    least = 512 if model_type == "deberta-v2" else 128
    overrides.setdefault("max_position_embeddings", max(cfg.data.max_length, least) + offset)
    config = BertConfig.preset(cfg.model["preset"], **overrides)
    if config.max_sequence_length < cfg.data.max_length:
        extra = f" + {offset} (RoBERTa's rows up to the pad row)" if offset else ""
        raise ConfigError(f"data.max_length={cfg.data.max_length} exceeds the model's "
                          f"{config.max_sequence_length} positions; set model.max_position_embeddings = "
                          f"{cfg.data.max_length}{extra} or leave it unset")
    return config


def check_segments(cfg: PretrainConfig, config: BertConfig, tokenizer_kind: str) -> None:
    """BERT's pair template gives the second segment token_type_id 1: the model needs 2 rows."""
    if OBJECTIVES[cfg.data.objective] and tokenizer_kind == "wordpiece" and config.type_vocab_size == 1:
        raise ConfigError(f"data.objective {cfg.data.objective} marks the second segment with token type 1, "
                          f"but the model has type_vocab_size=1 ({config.model_type}); use tokenizer.kind = "
                          "\"bpe\" (RoBERTa's pair template: all type ids 0) or model.type_vocab_size = 2")


def build_model(cfg: PretrainConfig, vocab_size: int, pad_token_id: int | None = None):
    """The model the objective trains: BertForMaskedLM, BertForPreTraining or ElectraPretrainer."""
    from ..heads import BertForMaskedLM, BertForPreTraining

    if cfg.model.get("init"):  # continued pre-training from a checkpoint (continued.py)
        from .continued import load_init_model

        if cfg.data.objective == "electra":
            raise ConfigError("model.init continues MLM (or MLM+NSP/SOP) pre-training; the electra "
                              "objective starts from scratch: remove model.init or change the objective")
        cls = BertForMaskedLM if OBJECTIVES[cfg.data.objective] is None else BertForPreTraining
        model, model.init_info = load_init_model(cfg.model, cls, vocab_size, cfg.data.max_length,
                                                 pad_token_id)
        return model
    config = model_config(cfg, vocab_size, pad_token_id)
    if cfg.data.objective == "electra":
        from ..variants.electra import ElectraPretrainer, generator_config

        e = cfg.electra or ElectraSection()
        generator = generator_config(config, e.generator_hidden_fraction, e.generator_layers or None)
        return ElectraPretrainer(config, generator, disc_weight=e.disc_weight, temperature=e.temperature)
    cls = BertForMaskedLM if OBJECTIVES[cfg.data.objective] is None else BertForPreTraining
    return cls(config)


def logged_outputs(cfg: PretrainConfig, model) -> dict[str, str]:
    """The parts of the objective the Trainer averages into the train rows besides the loss:
    {row key: field of the model's output}."""
    pair_task = OBJECTIVES[cfg.data.objective]
    if cfg.data.objective == "electra":
        names = {"generator_loss": "generator_loss", "discriminator_loss": "discriminator_loss"}
    elif pair_task is not None:
        names = {"mlm_loss": "mlm_loss", f"{pair_task}_loss": "nsp_loss"}  # the 2-way head's loss
    else:
        names = {}
    if model.config.num_experts:
        names["aux_loss"] = "aux_loss"  # the MoE load-balancing term (already inside the loss)
    return names


# ---------------------------------------------------------------------------- the recipe
def run_pretraining(cfg: PretrainConfig, out_dir: str, resume: bool = False,
                    progress: bool = True) -> dict:
    """Pre-train as configured; returns the final evaluation metrics."""
    import torch

    from ..data.collate import MLMCollator
    from ..data.examples import SpecialTokens, build_examples, make_builder
    from ..data.corpus import open_corpus
    from .batching import LengthBucketedBatches
    from .continued import masking_options, mix_examples, open_general
    from .distributed import init_distributed
    from .streaming import streaming_batches, take_examples
    from .evaluate import evaluate_pretraining
    from .trainer import Trainer, seed_everything

    t = cfg.train
    ctx = init_distributed(t.device)
    os.makedirs(out_dir, exist_ok=True)
    corpus = None
    if not (cfg.tokenizer.path or cfg.model.get("init")):  # only to train a tokenizer
        corpus = open_corpus(cfg.data.corpus, cfg.data.mode)
    tokenizer = get_tokenizer(cfg, corpus, out_dir, ctx.is_main, ctx)
    docs = get_documents(cfg, tokenizer, out_dir, ctx.is_main, ctx)
    train_docs, eval_docs = split_documents(len(docs), cfg.data.eval_fraction, t.seed)

    pair_task = OBJECTIVES[cfg.data.objective]
    special = SpecialTokens.from_tokenizer(tokenizer)
    builder = make_builder(cfg.data.builder, cfg.data.max_length, special)
    general = open_general(cfg, tokenizer, out_dir, ctx)  # None without data.general_corpus
    if cfg.data.streaming:  # examples are built lazily, a block of documents at a time
        train_examples = None
        eval_examples = take_examples(builder, docs, eval_docs, random.Random(t.seed + 1),
                                      cfg.data.max_eval_examples)
    else:
        # The examples are fixed for the run (like BERT's static data); the masks are not.
        train_examples = build_examples(builder, docs, train_docs, random.Random(t.seed))
        eval_examples = build_examples(builder, docs, eval_docs, random.Random(t.seed + 1))
        eval_examples = eval_examples[: cfg.data.max_eval_examples]
        if general is not None and cfg.data.general_fraction:
            general_examples = build_examples(builder, general.docs, general.train_docs,
                                              random.Random(t.seed + 2))
            train_examples = mix_examples(train_examples, general_examples,
                                          cfg.data.general_fraction, t.seed)

    def collator(seed: int) -> MLMCollator:
        return MLMCollator(tokenizer, mlm_probability=cfg.data.mlm_probability,
                           strategy=cfg.data.masking, static=cfg.data.static_masking, seed=seed,
                           **masking_options(cfg.data))

    train_collator = collator(t.seed + 1000 * ctx.rank)
    if cfg.data.streaming:
        # The stream's state (data position + the collator's RNG) is what the Trainer saves.
        batches = streaming_batches(builder, docs, train_docs, t.batch_size, train_collator, t.seed,
                                    ctx.rank, ctx.world_size, cfg.data.block_docs, general,
                                    cfg.data.general_fraction)
        data_state = batches
    else:
        batches = LengthBucketedBatches(train_examples, t.batch_size, train_collator, seed=t.seed,
                                        bucket_size=cfg.data.bucket_size, rank=ctx.rank,
                                        world_size=ctx.world_size)
        data_state = train_collator
    # Held-out batches are masked once, with their own seed: every evaluation sees the same task.
    eval_batches = list(LengthBucketedBatches(eval_examples, t.batch_size, collator(t.seed + 99991),
                                              shuffle=False)) if eval_examples else []
    general_eval_batches = []  # the forgetting monitor: held-out general text
    if general is not None:
        general_eval = take_examples(builder, general.docs, general.eval_docs,
                                     random.Random(t.seed + 3), cfg.data.max_eval_examples)
        general_eval_batches = list(LengthBucketedBatches(
            general_eval, t.batch_size, collator(t.seed + 99992), shuffle=False)) if general_eval else []

    vocab_size = max(tokenizer.get_vocab().values()) + 1
    seed_everything(t.seed)  # the same initial weights on every rank and every run
    model = build_model(cfg, vocab_size, tokenizer.pad_token_id)
    check_segments(cfg, model.config, tokenizer.kind)
    if ctx.is_main:
        atomic_write_json(os.path.join(out_dir, "pretrain_config.json"), cfg.to_dict())
        if progress:
            source = cfg.model.get("init") or cfg.model["preset"]
            data = (f"streamed examples (blocks of {cfg.data.block_docs} documents)"
                    if cfg.data.streaming else
                    f"{len(train_examples)} train examples, {len(batches)} batches per epoch per "
                    f"rank, padding {batches.padding_fraction():.1%}")
            print(f"pretrain: {type(model).__name__} {source} "
                  f"({model.num_parameters() / 1e6:.2f}M params), {len(docs)} documents, {data}, "
                  f"{len(eval_examples)} held-out examples", flush=True)
            if getattr(model, "init_info", None) and model.init_info["new_head_weights"]:
                print(f"pretrain: new MLM head ({cfg.model.get('head_init', 'identity')} init) on "
                      f"the encoder of {cfg.model['init']}", flush=True)

    if ctx.is_main and eval_batches:  # the context-free score the held-out metrics must beat
        from .evaluate import unigram_baseline

        baseline = unigram_baseline(docs, train_docs, eval_batches, vocab_size, tokenizer.all_special_ids)
        if baseline:
            baseline["most_frequent_token"] = tokenizer.convert_ids_to_tokens(baseline["most_frequent_token_id"])
            atomic_write_json(os.path.join(out_dir, "baseline.json"), baseline)
            if progress:
                print(f"pretrain: held-out baseline without context: most frequent token "
                      f"{baseline['most_frequent_token']!r} is {baseline['most_frequent_token_accuracy']:.1%} "
                      f"of the masks; unigram loss {baseline['unigram_loss']:.2f}", flush=True)

    def evaluate(m, held_out):
        if cfg.data.objective == "electra":
            from ..variants.electra import evaluate_electra

            return evaluate_electra(m, held_out, seed=t.seed)
        return evaluate_pretraining(m, held_out, pair_task or "nsp")

    def eval_fn(m):
        metrics = evaluate(m, eval_batches) if eval_batches else {}
        if general_eval_batches:
            metrics.update({f"general_{k}": v for k, v in evaluate(m, general_eval_batches).items()})
        return metrics

    trainer = Trainer(model, batches, t, out_dir, eval_fn=eval_fn, collator=data_state,
                      tokenizer=tokenizer, ctx=ctx, progress=progress,
                      log_outputs=logged_outputs(cfg, model), keeper=cfg.early_stopping.keeper(out_dir, tokenizer))
    torch.set_float32_matmul_precision("high")  # TF32 on GPUs that have it; no effect on CPU
    return trainer.train(resume=resume)

