"""Generation: greedy search and beam search, token for token as transformers 5's `generate`.

    ids = model.generate(input_ids, attention_mask, max_new_tokens=20, num_beams=4)

A decoder-only model (`BertLMHeadModel`) continues its prompt: the output is prompt + new tokens,
the prompts left-padded (right-padded ones, as the tokenizer pads, are moved to the left first).
An encoder-decoder (`EncoderDecoderModel`) encodes the input once and decodes from
`decoder_start_token_id`: the output is the start token + new tokens.

Greedy: y_t = argmax_v log p(v | y_<t, x). A row that produced an end-of-sequence token
(`eos_token_id`, one id or a list) is finished; its later tokens are `pad_token_id`, and
generation stops when every row is finished or `max_new_tokens` were produced.

Beam search keeps the `num_beams` best partial sequences by summed log-probability
s(y) = sum_t log p(y_t | y_<t, x). Each step scores every one-token continuation of every beam,
keeps the best K = max(2, 1 + #eos) * num_beams, and sets aside those that end (an eos token, or
the length limit) among the best num_beams as finished hypotheses, scored
s(y) / len(y)^length_penalty with len the number of generated tokens (length_penalty > 0
favours longer outputs). The others continue. A row stops when its finished list cannot improve:
with `early_stopping=True` as soon as num_beams hypotheses are finished; with False when the best
running beam, scored at its current length, cannot beat the worst finished one; with "never" at
the best length it could still reach (max length if length_penalty > 0). This is transformers 5's
vectorised beam search, rewritten to read top to bottom; the quirks are kept so the outputs agree:
rows finishing early are filled with pad_token_id, except that a pad id of 0 counts as unset there
and the eos id is used (BERT's [PAD] is 0: beam outputs pad with [SEP]).

`no_repeat_ngram_size=n` (> 0) forbids any n-gram to occur twice in a row's sequence (the prompt,
or an encoder-decoder's start token, included): a token that would complete an n-gram whose first
n - 1 tokens are the sequence's last n - 1 gets score -inf before the argmax or the beam ranking,
as transformers' NoRepeatNGramLogitsProcessor does. A small model's greedy output that repeats a
word ("blogs blogs blogs") cannot. `repetition_penalty=r` (CTRL's; 1 = off) makes every token
already in the row (its real tokens: a left-padded prompt's pads are not counted) less likely
before that: a score s becomes s / r where s > 0 and s * r where s < 0 (beam search: the log-probabilities).

Sampling (`do_sample=True`, num_beams 1) draws each token from softmax(scores) with torch's global
random generator (torch.manual_seed makes it repeatable) after, in transformers' order: the two
options above, `temperature` (scores / t), `top_k` (only the k highest scores; 50, transformers'
default; 0 = all) and `top_p` (nucleus: the fewest highest tokens whose probability sums past p,
always at least one). The same seed draws the same ids as transformers' `generate`;
`num_return_sequences` draws that many per input.

Without a cache each step re-runs the model on the whole sequence; with one (`use_cache=True`,
the default) only on the new token (bertkit/models/kv_cache.py): the same numbers, less work.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from bertkit.errors import ConfigError

NEG = -1.0e9  # transformers' "never choose this" score


@dataclass
class GenerationOptions:
    """What `generate` takes beyond the inputs; token ids default to the model config's."""

    max_new_tokens: int = 20
    num_beams: int = 1
    length_penalty: float = 1.0  # beam scores are divided by (generated length) ** length_penalty
    early_stopping: bool | str = False  # True, False or "never" (see the module docstring)
    num_return_sequences: int = 1  # beams returned per input, best first (<= num_beams)
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    decoder_start_token_id: int | None = None  # encoder-decoders: the first decoder token
    use_cache: bool = True
    no_repeat_ngram_size: int = 0  # > 0: no n-gram of this size occurs twice (0 = off)
    repetition_penalty: float = 1.0  # > 1: a token already in the row is less likely (1 = off)
    do_sample: bool = False  # draw each token (num_beams 1) instead of taking the most likely
    temperature: float = 1.0  # sampling: scores / temperature (< 1 sharper, > 1 flatter)
    top_k: int = 50  # sampling: only the k most likely tokens (0 = all); transformers' default
    top_p: float = 1.0  # sampling: the fewest most likely tokens whose probability reaches p (1 = all)

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "num_beams", "num_return_sequences"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        size = self.no_repeat_ngram_size
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ConfigError(f"no_repeat_ngram_size must be an integer >= 0 (0: off), got {size!r}")
        if self.early_stopping not in (True, False, "never"):
            raise ConfigError(f"early_stopping must be True, False or \"never\", got {self.early_stopping!r}")
        self._check_sampling()
        if self.num_return_sequences > self.num_beams and not self.do_sample:
            raise ConfigError(f"num_return_sequences ({self.num_return_sequences}) cannot exceed num_beams "
                              f"({self.num_beams}): each returned sequence is one beam (or draw them: do_sample=True)")

    def _check_sampling(self) -> None:
        """The sampling options' ranges, and no sampling option without sampling (it would be ignored)."""
        number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
        if not (number(self.repetition_penalty) and self.repetition_penalty > 0):
            raise ConfigError(f"repetition_penalty must be a number > 0 (1: off), got {self.repetition_penalty!r}")
        if not isinstance(self.do_sample, bool):
            raise ConfigError(f"do_sample must be True or False, got {self.do_sample!r}")
        if not (number(self.temperature) and self.temperature > 0):
            raise ConfigError(f"temperature must be a number > 0, got {self.temperature!r}")
        if not (isinstance(self.top_k, int) and not isinstance(self.top_k, bool) and self.top_k >= 0):
            raise ConfigError(f"top_k must be an integer >= 0 (0: every token), got {self.top_k!r}")
        if not (number(self.top_p) and 0 < self.top_p <= 1):
            raise ConfigError(f"top_p must be a number in (0, 1], got {self.top_p!r}")
        unset = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}
        named = [f"{name}={getattr(self, name)!r}" for name, value in unset.items() if getattr(self, name) != value]
        if named and not self.do_sample:
            raise ConfigError(f"{', '.join(named)} acts only when sampling: pass do_sample=True too (greedy and "
                              "beam search take the most likely tokens)")
        if self.do_sample and self.num_beams > 1:
            raise ConfigError(f"do_sample=True with num_beams={self.num_beams}: beam sampling is not built; sample "
                              "with num_beams=1, or search beams without do_sample")


class Generates:
    """`generate` for a model class (mixed into BertLMHeadModel and EncoderDecoderModel)."""

    is_encoder_decoder = False

    @property
    def decoder_config(self):
        """The config of the part that generates (an encoder-decoder's decoder)."""
        return self.config

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 **options) -> torch.Tensor:
        """Token ids (B * num_return_sequences, length); see the module docstring."""
        return generate(self, input_ids, attention_mask, GenerationOptions(**options))


# ---------------------------------------------------------------------------- model steps
class DecoderOnlySteps:
    """Next-token logits of a decoder-only model. Positions count real tokens only (a left-padded
    prompt's first real token is position 0), as transformers' generate numbers them."""

    def __init__(self, model, input_ids, attention_mask, use_cache: bool):
        self.model, self.use_cache, self.cache = model, use_cache, None
        self.mask = attention_mask
        self.positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)

    def expand(self, n: int) -> None:
        self.mask, self.positions = self.mask.repeat_interleave(n, 0), self.positions.repeat_interleave(n, 0)

    def logits(self, sequences: torch.Tensor) -> torch.Tensor:
        grow = sequences.shape[1] - self.mask.shape[1]
        if grow:  # the tokens generated since the last call: real, at the next positions
            self.mask = torch.cat([self.mask, self.mask.new_ones(self.mask.shape[0], grow)], 1)
            steps = torch.arange(1, grow + 1, device=self.positions.device)
            self.positions = torch.cat([self.positions, self.positions[:, -1:] + steps], 1)
        new = sequences.shape[1] - (self.cache.get_seq_length() if self.cache is not None else 0)
        out = self.model(sequences[:, -new:], attention_mask=self.mask, position_ids=self.positions[:, -new:],
                         past_key_values=self.cache, use_cache=self.use_cache, logits_to_keep=1)
        self.cache = out.past_key_values
        return out.logits[:, -1].float()

    def reorder(self, rows: torch.Tensor) -> None:
        if self.cache is not None:
            self.cache.reorder_cache(rows)


class EncoderDecoderSteps:
    """Next-token logits of an encoder-decoder: the encoder runs once, the decoder every step."""

    def __init__(self, model, input_ids, attention_mask, use_cache: bool):
        self.model, self.use_cache, self.cache = model, use_cache, None
        self.states = model.encoder_states(input_ids, attention_mask)
        self.mask = attention_mask

    def expand(self, n: int) -> None:
        self.states = self.states.repeat_interleave(n, 0)
        self.mask = None if self.mask is None else self.mask.repeat_interleave(n, 0)

    def logits(self, sequences: torch.Tensor) -> torch.Tensor:
        new = sequences.shape[1] - (self.cache.get_seq_length() if self.cache is not None else 0)
        out = self.model.decoder(sequences[:, -new:], encoder_hidden_states=self.states,
                                 encoder_attention_mask=self.mask, past_key_values=self.cache,
                                 use_cache=self.use_cache, logits_to_keep=1)
        self.cache = out.past_key_values
        return out.logits[:, -1].float()

    def reorder(self, rows: torch.Tensor) -> None:
        if self.cache is not None:
            self.cache.reorder_cache(rows)


# ---------------------------------------------------------------------------- generate
def special_ids(model, options: GenerationOptions) -> tuple[torch.Tensor | None, int | None, int | None]:
    """(eos ids as a 1-D tensor or None, pad id, decoder start id): the options', else the model
    config's; a missing pad id falls back to the first eos id (as transformers)."""
    def from_config(config, name):  # a field, or a transformers key kept in `extra`
        value = getattr(config, name, None)
        return config.extra.get(name) if value is None else value

    def pick(name):  # as transformers: generate's argument, the model config's, its decoder config's
        value = getattr(options, name, None)
        value = from_config(model.config, name) if value is None else value
        return from_config(model.decoder_config, name) if value is None else value

    eos, pad, start = pick("eos_token_id"), pick("pad_token_id"), pick("decoder_start_token_id")
    eos = None if eos is None else torch.tensor([eos] if isinstance(eos, int) else list(eos), dtype=torch.long)
    if pad is None and eos is not None:
        pad = int(eos[0])
    if model.is_encoder_decoder and start is None:
        start = pick("bos_token_id")
        if start is None:
            raise ConfigError("an encoder-decoder needs decoder_start_token_id (the first decoder token, "
                              "[CLS] for BERT2BERT): set it in the config or pass it to generate")
    return eos, pad, start


def default_mask(input_ids: torch.Tensor, eos: torch.Tensor | None, pad: int | None) -> torch.Tensor:
    """A decoder-only prompt's mask when none is given: 0 at pad tokens if the prompt holds any and
    pad is not an eos id (else all ones), as transformers infers it."""
    ones = torch.ones_like(input_ids)
    if pad is None or not bool((input_ids == pad).any()) or (eos is not None and bool((eos == pad).any())):
        return ones
    return (input_ids != pad).long()


def left_aligned(input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each prompt's padding moved before its tokens (order kept): new tokens follow the last
    column, so a right-padded prompt (what bertkit's tokenizer makes) would continue after its
    pads. Left-padded prompts are returned as they are."""
    order = torch.sort(mask.long(), dim=1, stable=True).indices  # pads (0) first, tokens in order
    return input_ids.gather(1, order), mask.gather(1, order)


def generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
             options: GenerationOptions) -> torch.Tensor:
    """Greedy (num_beams=1), sampling or beam search from `model` (see the module docstring)."""
    if input_ids.dim() != 2:
        raise ConfigError(f"input_ids must have shape (batch, sequence), got {tuple(input_ids.shape)}")
    eos, pad, start = special_ids(model, options)
    was_training = model.training
    model.eval()
    try:
        if model.is_encoder_decoder:
            steps = EncoderDecoderSteps(model, input_ids, attention_mask, options.use_cache)
            prompt = torch.full((input_ids.shape[0], 1), start, dtype=torch.long, device=input_ids.device)
            pads = torch.zeros(prompt.shape[0], dtype=torch.long, device=prompt.device)  # no padding: start token
        else:
            mask = attention_mask if attention_mask is not None else default_mask(input_ids, eos, pad)
            input_ids, mask = left_aligned(input_ids, mask)
            steps, prompt = DecoderOnlySteps(model, input_ids, mask, options.use_cache), input_ids
            pads = (mask == 0).sum(1)  # each left-padded row's pads: no token the penalty counts
        max_length = prompt.shape[1] + options.max_new_tokens
        positions = model.decoder_config.max_sequence_length
        if max_length > positions:
            raise ConfigError(f"{prompt.shape[1]} prompt tokens + max_new_tokens={options.max_new_tokens} exceed "
                              f"the decoder's {positions} positions; lower max_new_tokens or shorten the input")
        rules = Rules(options, pads)
        if options.num_beams == 1:
            return greedy_search(steps, prompt, max_length, eos, pad, rules)
        return beam_search(steps, prompt, max_length, eos, pad, rules)
    finally:
        model.train(was_training)


def without_repeated_ngrams(scores: torch.Tensor, sequences: torch.Tensor, n: int) -> torch.Tensor:
    """`scores` (rows, vocab) with -inf at each token that would repeat an n-gram of its row of
    `sequences` (rows, length): one that followed the row's last n - 1 tokens before. n = 0: as is."""
    length = sequences.shape[1]
    if n == 0 or length + 1 < n:
        return scores
    scores = scores.clone()
    for row, tokens in enumerate(sequences.tolist()):
        prefix = tokens[length - n + 1:]
        banned = [tokens[i + n - 1] for i in range(length - n + 1) if tokens[i:i + n - 1] == prefix]
        if banned:
            scores[row, banned] = float("-inf")
    return scores


def with_repetition_penalty(scores: torch.Tensor, sequences: torch.Tensor, penalty: float,
                            pads: torch.Tensor) -> torch.Tensor:
    """`scores` (rows, vocab) with each token already among a row's real tokens (after its `pads`
    left pads) made less likely: s / penalty where s > 0, s * penalty where s < 0. 1: as is."""
    if penalty == 1.0:
        return scores
    rows, vocab = scores.shape
    padding = torch.arange(sequences.shape[1], device=sequences.device)[None] < pads[:, None]
    seen = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=scores.device)
    seen.scatter_(1, sequences.masked_fill(padding, vocab), True)  # pads go to the extra column
    penalized = torch.where(scores < 0, scores * penalty, scores / penalty)
    return torch.where(seen[:, :vocab], penalized, scores)


def for_sampling(scores: torch.Tensor, options: GenerationOptions) -> torch.Tensor:
    """`scores` (rows, vocab) divided by the temperature, then -inf outside the top_k highest and
    outside the top_p nucleus (the highest tokens whose probabilities sum past top_p; the most
    likely always stays), as transformers' warpers in that order."""
    if options.temperature != 1.0:
        scores = scores / options.temperature
    if options.top_k:
        kth = torch.topk(scores, min(options.top_k, scores.shape[-1])).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if options.top_p < 1.0:
        ascending, order = torch.sort(scores, descending=False)
        below = ascending.softmax(-1).cumsum(-1) <= 1 - options.top_p  # the tail whose mass stays under 1 - p
        below[:, -1] = False
        scores = scores.masked_fill(below.scatter(1, order, below), float("-inf"))
    return scores


@dataclass
class Rules:
    """What shapes the next-token scores besides the model: the generation options and each row's
    left pads (rows expand with beams or returned samples; `expand` follows them)."""

    options: GenerationOptions
    pads: torch.Tensor  # (rows,)

    def expand(self, n: int) -> None:
        self.pads = self.pads.repeat_interleave(n, 0)

    def scores(self, scores: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
        """The repetition penalty, then the n-gram ban, as transformers' processors in that order."""
        scores = with_repetition_penalty(scores, sequences, self.options.repetition_penalty, self.pads)
        return without_repeated_ngrams(scores, sequences, self.options.no_repeat_ngram_size)

    def next_tokens(self, logits: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
        """The argmax, or with do_sample one draw from softmax of the sampling scores."""
        scores = self.scores(logits, sequences)
        if not self.options.do_sample:
            return scores.argmax(-1)
        return torch.multinomial(for_sampling(scores, self.options).softmax(-1), num_samples=1)[:, 0]


def greedy_search(steps, sequences: torch.Tensor, max_length: int, eos: torch.Tensor | None,
                  pad: int | None, rules: Rules) -> torch.Tensor:
    """Greedy or sampled decoding (num_beams 1), `num_return_sequences` rows per input."""
    if rules.options.num_return_sequences > 1:  # each input's rows are drawn apart
        n = rules.options.num_return_sequences
        steps.expand(n)
        rules.expand(n)
        sequences = sequences.repeat_interleave(n, 0)
    unfinished = torch.ones(sequences.shape[0], dtype=torch.bool, device=sequences.device)
    while True:
        tokens = rules.next_tokens(steps.logits(sequences), sequences)
        if eos is not None:  # finished rows only pad
            tokens = torch.where(unfinished, tokens, torch.full_like(tokens, pad))
        sequences = torch.cat([sequences, tokens[:, None]], dim=-1)
        if eos is not None:
            unfinished &= ~torch.isin(tokens, eos.to(tokens.device))
        if sequences.shape[1] >= max_length or not bool(unfinished.any()):
            return sequences


# ---------------------------------------------------------------------------- beam search
@dataclass
class Beams:
    """Per input, `num_beams` sequences in a (B, num_beams, max_length) buffer, their scores and the
    beam (row of the flat batch) each generated token came from: the running beams, or the
    finished hypotheses (`done` marks real ones)."""

    sequences: torch.Tensor
    scores: torch.Tensor
    origins: torch.Tensor  # (B, num_beams, max_length - prompt length), -1 where nothing was generated
    done: torch.Tensor | None = None

    def take(self, index: torch.Tensor) -> "Beams":
        """The beams at `index` (B, n) along the beam dimension."""
        return Beams(*(None if getattr(self, f.name) is None else gather_beams(getattr(self, f.name), index)
                       for f in fields(self)))


def gather_beams(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    while index.dim() < tensor.dim():
        index = index.unsqueeze(-1)
    return torch.take_along_dim(tensor, index, dim=1)


def beam_search(steps, prompt: torch.Tensor, max_length: int, eos: torch.Tensor | None, pad: int | None,
                rules: Rules) -> torch.Tensor:
    options = rules.options
    batch, prompt_len = prompt.shape
    k, device = options.num_beams, prompt.device
    keep = max(2, 1 + (0 if eos is None else len(eos))) * k  # enough that k beams survive eos choices
    in_top_k = torch.arange(keep, device=device) < k
    fill = (pad or int(eos[0])) if eos is not None else -1  # transformers' fill value (pad id 0 = unset)
    sequences = torch.full((batch, k, max_length), fill, dtype=torch.long, device=device)
    sequences[:, :, :prompt_len] = prompt[:, None]
    origins = torch.full((batch, k, max_length - prompt_len), -1, dtype=torch.long, device=device)
    running = Beams(sequences, torch.full((batch, k), NEG, device=device), origins)
    running.scores[:, 0] = 0  # only the first beam is live at the start: no duplicate continuations
    finished = Beams(sequences.clone(), torch.full((batch, k), NEG, device=device), origins.clone(),
                     torch.zeros(batch, k, dtype=torch.bool, device=device))
    improvable = torch.ones(batch, 1, dtype=torch.bool, device=device)
    steps.expand(k)
    rules.expand(k)
    length = prompt_len
    while True:
        flat = running.sequences[:, :, :length].flatten(0, 1)
        log_probs = rules.scores(F.log_softmax(steps.logits(flat), dim=-1), flat)
        candidates, ends = top_continuations(running, log_probs, length, prompt_len, keep, eos, max_length)
        live = candidates.scores + ends.float() * NEG  # ended candidates do not run on
        running = Beams(candidates.sequences, live, candidates.origins).take(live.topk(k).indices)
        finished = add_finished(finished, candidates, ends & in_top_k, improvable, length + 1 - prompt_len, options)
        steps.reorder(running.origins[:, :, length - prompt_len].flatten())
        length += 1
        improvable = can_improve(improvable, running.scores, finished, length - prompt_len,
                                 max_length - prompt_len, options)
        all_done = bool(finished.done.all()) and options.early_stopping is True
        if not bool(improvable.any()) or all_done or bool(ends.all()):
            break
    return best_hypotheses(finished, prompt_len, options.num_return_sequences)


def top_continuations(running: Beams, log_probs: torch.Tensor, length: int, prompt_len: int, keep: int,
                      eos: torch.Tensor | None, max_length: int) -> tuple[Beams, torch.Tensor]:
    """The `keep` best one-token continuations of all beams of each input by summed log-probability,
    and which of them end (an eos token, or the length limit reached)."""
    batch, k = running.scores.shape
    vocab = log_probs.shape[-1]
    totals = (log_probs.view(batch, k, vocab) + running.scores[:, :, None]).view(batch, k * vocab)
    scores, index = totals.topk(keep)
    beam, token = index // vocab, index % vocab
    candidates = Beams(gather_beams(running.sequences, beam), scores, gather_beams(running.origins, beam))
    candidates.sequences[:, :, length] = token
    candidates.origins[:, :, length - prompt_len] = beam + torch.arange(batch, device=beam.device)[:, None] * k
    ends = torch.full_like(token, length + 1 >= max_length, dtype=torch.bool)
    if eos is not None:
        ends |= torch.isin(token, eos.to(token.device))
    return candidates, ends


def add_finished(finished: Beams, candidates: Beams, ended: torch.Tensor, improvable: torch.Tensor,
                 generated: int, options: GenerationOptions) -> Beams:
    """Merge the candidates that just ended into the finished hypotheses, scored
    sum log p / generated ** length_penalty, keeping the best num_beams of old and new."""
    k = finished.scores.shape[1]
    scores = candidates.scores / (generated ** options.length_penalty)
    full = finished.done.all(-1, keepdim=True) & (options.early_stopping is True)
    scores = scores + full.float() * NEG + (~improvable).float() * NEG + (~ended).float() * NEG
    merged = Beams(torch.cat([finished.sequences, candidates.sequences], 1), torch.cat([finished.scores, scores], 1),
                   torch.cat([finished.origins, candidates.origins], 1), torch.cat([finished.done, ended], 1))
    return merged.take(merged.scores.topk(k).indices)


def can_improve(improvable: torch.Tensor, running_scores: torch.Tensor, finished: Beams, generated: int,
                most: int, options: GenerationOptions) -> torch.Tensor:
    """Per input: could the best running beam still beat the worst finished hypothesis?"""
    penalty = options.length_penalty
    best_length = most if options.early_stopping == "never" and penalty > 0 else generated
    best_running = running_scores[:, :1] / (best_length ** penalty)
    worst = torch.where(finished.done, finished.scores.min(1, keepdim=True).values, NEG)
    return improvable & (best_running > worst).any(-1, keepdim=True)


def best_hypotheses(finished: Beams, prompt_len: int, n: int) -> torch.Tensor:
    """The n best finished sequences of each input, cut to the longest one's length."""
    sequences = finished.sequences[:, :n].flatten(0, 1)
    generated = (finished.origins[:, :n].flatten(0, 1) >= 0).sum(1).max()
    return sequences[:, :prompt_len + int(generated)]
