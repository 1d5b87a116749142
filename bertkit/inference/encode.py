"""Sentence embeddings: the encoder's last hidden states pooled into one vector, as
sentence-transformers defines it (all-MiniLM-L6-v2 and friends were trained with mean pooling):
the modes of `bertkit.models.sentence_embedding.pool` (mean, max, cls, ... with their formulas),
with m the attention mask (1 on real tokens, 0 on padding; also 0 on a prompt's tokens when the
layout says include_prompt = false); several modes are concatenated; then e / ||e||_2 when the
layout normalises. A sentence-transformers directory says which (see sentence_layout.py); a plain
Hugging Face directory gets mean pooling + normalisation. Texts are encoded in batches of
similar length: sorting by token count before batching removes most padding, which is pure
waste (measured 1.7x on BBC paragraphs, see docs/benchmarks.md), and the sorted texts are cut
into batches where that removes more padding than the extra forward call costs
(`data.batches.length_batches`; on a CPU: a GPU, which runs the real tokens only and pays for
each call's launches, takes batches of batch_size, `inference_batches`); results come back in the
caller's order.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Sequence

import numpy as np
import torch

from bertkit.errors import CheckpointError, DataError
from bertkit.inference.fastpath import pack_for_cpu, weights_key
from bertkit.models.hub_cache import resolve_model_dir
from bertkit.data.batches import inference_batches, pad_rows
from bertkit.inference.overlap import HostCopy, run_one_ahead
from bertkit.models.encoder import BertModel
from bertkit.runtime.devices import copy_without_wait
from bertkit.runtime.precision import autocast, check_precision, resolve_precision
from bertkit.runtime.progress import progress
from bertkit.inference.quantize import check_quantize, quantize_int8
from bertkit.models.sentence_embedding import pool
from bertkit.models.sentence_layout import SentenceLayout, read_layout, write_layout
from bertkit.tokenizer import Tokenizer

PROGRESS_MIN_BATCHES = 20  # show_progress=None: a bar only when there are at least this many batches


class SentenceEncoder:
    """A tokenizer, a `BertModel` and a pooling layout, with `encode(texts) -> (n, dim)` embeddings."""

    sort_by_length = True  # False only to measure what sorting buys (benchmarks/bench_levers.py)
    pack_weights = True  # fp32 on CPU: oneDNN-packed copy (fastpath.py); False to measure it
    cut_batches = True  # False: fixed batches of batch_size sorted texts (to measure length_batches)

    def __init__(self, model: BertModel, tokenizer, layout: SentenceLayout | None = None,
                 quantize: str | None = None, precision: str = "auto") -> None:
        """`quantize="int8"` runs an int8 copy of the model's transformer layers (quantize.py;
        cosine >= 0.99 to fp32 measured on BBC, docs/inference.md); in fp32 on CPU a copy with
        oneDNN-packed weights runs (fastpath.py; same numbers, faster). `precision` (runtime/precision.py):
        "auto" = bf16 autocast on a GPU with bf16, fp32 on the CPU; vectors come back as float32."""
        vocab = tokenizer.vocab_size
        if vocab > model.config.vocab_size:
            raise CheckpointError(
                f"the tokenizer's vocabulary ({vocab} tokens) is larger than the model's "
                f"({model.config.vocab_size}): ids past {model.config.vocab_size - 1} have no "
                "embedding; use the tokenizer saved with this model")
        self.model = model.eval()  # as given: what save_pretrained writes and attributes read
        self.quantize = check_quantize(quantize)
        self.precision = check_precision(precision)
        self.tokenizer = tokenizer
        self.layout = layout or SentenceLayout()
        self.runner = self._make_runner()

    def _make_runner(self) -> torch.nn.Module:
        """What encode() runs: an int8 or packed inference copy of self.model (a copy given runs
        as it is), remembering which weights it was made from (`fastpath.weights_key`)."""
        model, runner = self.model, self.model
        if self.quantize:
            runner = quantize_int8(model, self.tokenizer)
        elif (self.pack_weights and self._runs_fp32_on_cpu()
              and not getattr(model, "inference_copy", None)):
            runner = pack_for_cpu(model)
        self._runner_of = (id(model), weights_key(model))
        return runner

    def _runs_fp32_on_cpu(self) -> bool:
        """The packed copy's fused oneDNN kernels take fp32 inputs only: not under bf16 autocast."""
        device = next(self.model.parameters()).device
        return device.type == "cpu" and resolve_precision(self.precision, device) == "fp32"

    def _current_runner(self) -> torch.nn.Module:
        """The inference copy, made anew when self.model was replaced or its weights changed
        since (a training step, load_state_dict): a copy never runs stale weights."""
        if self._runner_of != (id(self.model), weights_key(self.model)):
            self.runner = self._make_runner()
        return self.runner

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, quantize: str | None = None,
                        device: torch.device | str = "cpu", precision: str = "auto") -> "SentenceEncoder":
        """Load a sentence-transformers directory (modules.json: pooling, normalisation, prompts)
        or a plain model directory (mean pooling + normalisation), to run on `device`."""
        directory = resolve_model_dir(directory)  # a directory, or ORG/NAME in the local HF cache
        layout = read_layout(directory)
        model_dir = os.path.join(directory, layout.transformer_path)
        with warnings.catch_warnings():  # a task model's head (classifier, MLM, QA) is no part of an encoder
            warnings.filterwarnings("ignore", message=r".* are not used by this model")
            model = BertModel.from_pretrained(model_dir).to(device)
        return cls(model, Tokenizer.from_pretrained(model_dir), layout, quantize, precision)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Write the encoder, its tokenizer and sentence-transformers' files, so that
        `sentence_transformers.SentenceTransformer(directory)` gives the same vectors."""
        self.model.save_pretrained(directory, tokenizer=self.tokenizer)
        write_layout(directory, self.layout, self.model.config.hidden_size)

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size * len(self.layout.pooling)

    def encode(self, texts: Sequence[str] | str, batch_size: int = 32, max_length: int | None = None,
               normalize: bool | None = None, show_progress: bool | None = None,
               prompt: str | None = None, prompt_name: str | None = None) -> np.ndarray:
        """Embed `texts` as an (n, dim) float32 array, row i for texts[i]; one string (not in a
        list) gives one (dim,) vector, as sentence-transformers' `encode` does.

        Texts longer than `max_length` tokens are truncated (the tokenizer warns once); None: the
        layout's max_seq_length (else the tokenizer's model_max_length). `max_length` is at least 3
        and at most the model's positions (larger values are cut to it). `normalize` None: as the
        layout says. `prompt` (or a named prompt of the layout, `prompt_name`; default: the
        layout's default prompt) is put in front of every text. `show_progress=None` shows a bar
        when there are many batches.
        """
        if isinstance(texts, str):  # one text, one vector: (dim,), so two of them give a cosine by `a @ b`
            return self.encode([texts], batch_size, max_length, normalize, show_progress, prompt, prompt_name)[0]
        texts = _text_list(texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
        layout = self.layout
        normalize = layout.normalize if normalize is None else normalize
        max_length = self._max_length(max_length)
        texts, prompt_length = self._prompted(texts, self._prompt(prompt, prompt_name))
        # Tokenize everything at once (fast, in Rust), unpadded: one truncation warning at most.
        encoded = self.tokenizer(texts, padding=False, truncation=True, max_length=max_length,
                                 return_tensors=None)
        ids, types = encoded["input_ids"], encoded["token_type_ids"]
        # Longest first: similar lengths share a batch, and the peak memory comes early.
        lengths = [len(x) for x in ids]
        device = next(self.model.parameters()).device
        if self.sort_by_length:
            batches = inference_batches(lengths, batch_size, device, self.cut_batches)
        else:  # the caller's order (to measure what sorting buys)
            batches = [list(range(i, min(i + batch_size, len(texts)))) for i in range(0, len(texts), batch_size)]
        if show_progress is None:
            show_progress = len(batches) >= PROGRESS_MIN_BATCHES

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        pad_id = self.model.config.pad_token_id
        runner = self._current_runner()

        def launch(rows: list[int]) -> HostCopy:
            lengths = np.fromiter((len(ids[i]) for i in rows), dtype=np.int64, count=len(rows))
            width = int(lengths.max())
            mask = torch.from_numpy((np.arange(width) < lengths[:, None]).astype(np.int64))
            input_ids = torch.from_numpy(pad_rows([ids[i] for i in rows], width, pad_id))
            token_types = torch.from_numpy(pad_rows([types[i] for i in rows], width, 0))
            input_ids, mask, token_types = (copy_without_wait(t, device) for t in (input_ids, mask, token_types))
            hidden = runner(input_ids, mask, token_types).last_hidden_state
            pooled = pool(hidden.float(), mask, layout.pooling, prompt_length)
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            return HostCopy(pooled.float())

        def collect(rows: list[int], pooled: HostCopy) -> None:
            out[rows] = pooled.numpy()

        with torch.inference_mode(), autocast(self.precision, device):
            run_one_ahead(_progress(batches, show_progress), launch, collect)
        return out


    def _max_length(self, max_length: int | None) -> int:
        """The token limit of a text: as given, else the layout's or the tokenizer's, cut to the
        model's positions."""
        if max_length is None:
            max_length = self.layout.max_seq_length or self.tokenizer.model_max_length or 512
        # [CLS] and [SEP] take two places: below 3 the tokenizer cannot truncate and silently
        # ignored the limit. Above the model's positions it is cut to them.
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
            raise DataError(f"max_length must be an integer of at least 3 (two special tokens and one of "
                            f"text), got {max_length!r}")
        return min(max_length, self.model.config.max_sequence_length)

    def _prompted(self, texts: list[str], prompt: str) -> tuple[list[str], int]:
        """(the texts as the model reads them: after `prompt`, lower-cased if the layout says so;
        how many leading tokens after [CLS] the pooling leaves out: the prompt's, unless included)."""
        prompt_length = 0
        if prompt:
            texts = [prompt + t for t in texts]
            if not self.layout.include_prompt:  # the prompt's tokens after [CLS], not its closing [SEP]
                prompt_length = len(self.tokenizer.encode(prompt)) - 1
        if self.layout.do_lower_case:
            texts = [t.lower() for t in texts]
        return texts, prompt_length

    def _prompt(self, prompt: str | None, prompt_name: str | None) -> str:
        if prompt is not None and prompt_name is not None:
            raise DataError("pass prompt or prompt_name, not both")
        if prompt is not None:
            return prompt
        name = prompt_name if prompt_name is not None else self.layout.default_prompt_name
        if name is None:
            return ""
        if name not in self.layout.prompts:
            raise DataError(f"no prompt named {name!r}; this model has {sorted(self.layout.prompts) or 'none'}")
        return self.layout.prompts[name]


def _progress(items, show: bool):
    return progress(items, desc="encode", unit="batch") if show else items


def _text_list(texts) -> list:
    """encode()'s texts as a non-empty list: one string, or an iterable of them (a list, an array)."""
    if not isinstance(texts, str) and (isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Iterable)):
        raise DataError(f"encode() takes a string or a list of strings, got {type(texts).__name__}; "
                        "e.g. encode(['first text', 'second text'])")
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts:
        raise DataError("encode() got no texts; pass a non-empty list of strings")
    return texts
