"""ELECTRA (Clark et al. 2020): replaced-token detection with a small generator.

A small MLM generator fills the masked positions with tokens sampled from its own softmax; the
discriminator (the model that is kept) reads the corrupted sequence and predicts, for every real
token, whether it was replaced. Losses, with M the masked positions and R the real (non-pad) ones:

    generator_loss     = mean_{t in M} -log p_G(x_t | x_masked)
    discriminator_loss = mean_{t in R} BCE(D(x_corrupt)_t, [x_corrupt_t != x_t])
    loss               = generator_loss + disc_weight * discriminator_loss        (disc_weight = 50)

A sampled token equal to the original counts as *not* replaced. Sampling is Gumbel-max under
`torch.no_grad()`: no gradient flows from the discriminator into the generator.

The two share their embeddings (token, position, segment tables and their LayerNorm): one module
object sits in both encoders. When the generator is narrower than the embeddings it projects them
down (`encoder.embedding_hidden_mapping_in`, saved as ELECTRA's `embeddings_project`).

`ElectraForPreTraining` is the discriminator alone, laid out as transformers' class of that name;
`ElectraPretrainer` holds both and saves them as `discriminator/` and `generator/` directories
that transformers' ElectraForPreTraining and ElectraForMaskedLM read.

The registry's "electra" entry (`bertkit/objectives/registry.py`) is made of `build_pretrainer`
(the pair, from the discriminator's config and the `[electra]` section, `ElectraSettings`),
the MLM collator (the generator reads an MLM batch) and `evaluate_electra`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.checkpoint import PretrainedMixin
from bertkit.models.config import BertConfig
from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, ClassifierOutput, with_aux
from bertkit.models.encoder import BertModel, ModelOutput, activation


@dataclass
class ElectraSettings:
    """[electra]: the generator of ELECTRA's replaced-token detection."""

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


def generator_config(config: BertConfig, hidden_fraction: float = 0.25,
                     num_hidden_layers: int | None = None) -> BertConfig:
    """The generator's config: hidden size, heads and feed-forward width scaled by
    `hidden_fraction` (the paper's 1/4, as ELECTRA's code does), the same embeddings, the same or
    fewer layers."""
    if not 0 < hidden_fraction <= 1:
        raise ConfigError(f"hidden_fraction must be in (0, 1], got {hidden_fraction}: a generator "
                          "wider than its discriminator makes the detection task too hard")
    hidden = max(1, int(config.hidden_size * hidden_fraction))
    heads = max(1, int(config.num_attention_heads * hidden_fraction))
    while hidden % heads:
        heads -= 1
    return config.replace(
        model_type="electra", hidden_size=hidden, num_attention_heads=heads,
        intermediate_size=max(1, int(config.intermediate_size * hidden_fraction)),
        embedding_size=config.embedding_dim,
        num_hidden_layers=num_hidden_layers or config.num_hidden_layers)


def check_pair(generator: BertConfig, discriminator: BertConfig) -> None:
    """Refuse a generator that cannot share the discriminator's embeddings or is wider than it."""
    if generator.hidden_size > discriminator.hidden_size:
        raise ConfigError(
            f"the generator (hidden_size {generator.hidden_size}) is wider than the discriminator "
            f"({discriminator.hidden_size}); ELECTRA needs a smaller generator (1/4 to 1/2 of the "
            "width works best), otherwise its replacements are too hard to detect")
    if generator.num_hidden_layers > discriminator.num_hidden_layers:
        raise ConfigError(f"the generator has more layers ({generator.num_hidden_layers}) than the "
                          f"discriminator ({discriminator.num_hidden_layers}); use the same or fewer")
    for name in ("vocab_size", "embedding_dim", "max_position_embeddings", "type_vocab_size",
                 "pad_token_id", "model_type", "position_embedding_type"):
        if getattr(generator, name) != getattr(discriminator, name):
            raise ConfigError(f"generator and discriminator share their embeddings, so {name} must be "
                              f"equal ({getattr(generator, name)} vs {getattr(discriminator, name)})")


class ElectraDiscriminatorPredictions(nn.Module):
    """One logit per token, 'replaced': w2 . act(W1 h + b1) + b2 (transformers' names)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.activation(self.dense(hidden))).squeeze(-1)


class ElectraForPreTraining(PretrainedMixin, nn.Module):
    """The discriminator: encoder + replaced-token head. logits (B, T); labels 1 = replaced."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                        output_attentions, output_hidden_states)
        logits = self.discriminator_predictions(out.last_hidden_state)
        loss = None
        if labels is not None:
            real = attention_mask.bool() if attention_mask is not None else torch.ones_like(labels, dtype=torch.bool)
            loss = F.binary_cross_entropy_with_logits(logits[real], labels[real].to(logits.dtype))
        return ClassifierOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.bert.embeddings.word_embeddings


@dataclass
class ElectraPreTrainingOutput(ModelOutput):
    loss: torch.Tensor | None = None
    generator_loss: torch.Tensor | None = None
    discriminator_loss: torch.Tensor | None = None
    generator_logits: torch.Tensor | None = None  # (N, V) at the N masked positions
    discriminator_logits: torch.Tensor | None = None  # (B, T)
    replaced: torch.Tensor | None = None  # (B, T) bool: the discriminator's targets
    corrupted_ids: torch.Tensor | None = None  # (B, T): what the discriminator read
    aux_loss: torch.Tensor | None = None  # MoE load balancing of both models, already in `loss`

    @property
    def logits(self) -> torch.Tensor | None:
        """The generator's MLM logits, so MLM evaluation code reads this output as any MLM's."""
        return self.generator_logits


def gumbel_sample(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """One draw per row from softmax(logits / T): argmax(logits / T + Gumbel noise)."""
    uniform = torch.rand_like(logits).clamp_(1e-9, 1.0 - 1e-9)
    return (logits / temperature - torch.log(-torch.log(uniform))).argmax(dim=-1)


class ElectraPretrainer(PretrainedMixin, nn.Module):
    """Generator + discriminator with shared embeddings; `forward` returns the ELECTRA loss.

    Inputs are an MLM batch: `input_ids` with masked positions already replaced ([MASK] / random
    / kept, as the masking collator makes them) and `labels` holding the original ids there and
    -100 elsewhere.

    `save_pretrained(d)` writes the pair as one bertkit checkpoint (`d/config.json`: the
    discriminator's config plus `electra_generator` / `electra_disc_weight` / `electra_temperature`
    fields; `d/model.safetensors`: both models) which `from_pretrained` and the Trainer's resume
    read, and the two exports transformers reads: `d/discriminator` (ElectraForPreTraining) and
    `d/generator` (ElectraForMaskedLM).
    """

    def __init__(self, config: BertConfig, generator: BertConfig | None = None,
                 disc_weight: float | None = None, temperature: float | None = None):
        super().__init__()
        settings = {k: v for k, v in config.extra.items() if k.startswith("electra_")}
        disc_config = dataclasses.replace(
            config, extra={k: v for k, v in config.extra.items() if k not in settings})
        if generator is None:
            saved = settings.get("electra_generator")
            generator = BertConfig.from_dict(saved) if saved else generator_config(disc_config)
        check_pair(generator, disc_config)
        self.disc_weight = float(disc_weight if disc_weight is not None else settings.get("electra_disc_weight", 50.0))
        self.temperature = float(temperature if temperature is not None else settings.get("electra_temperature", 1.0))
        gen_fields = {k: v for k, v in generator.to_dict().items() if k != "architectures"}
        self.config = dataclasses.replace(disc_config, extra=dict(
            disc_config.extra, electra_generator=gen_fields, electra_disc_weight=self.disc_weight,
            electra_temperature=self.temperature))
        self.discriminator = ElectraForPreTraining(disc_config)
        self.generator = BertForMaskedLM(generator)
        self.tie_embeddings()

    def tie_embeddings(self) -> None:
        shared = self.discriminator.bert.embeddings
        self.generator.bert.embeddings = shared
        # the generator's MLM decoder is the (now shared) word-embedding table
        self.generator.cls.predictions.__dict__["word_embeddings"] = shared.word_embeddings

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor,
                attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> ElectraPreTrainingOutput:
        masked = labels != IGNORE_INDEX
        gen = self.generator(input_ids, attention_mask, token_type_ids, labels=labels)
        if not masked.any():  # nothing masked in this batch: no generator signal, nothing replaced
            gen_loss = gen.logits.sum() * 0.0
        else:
            gen_loss = gen.loss if gen.aux_loss is None else gen.loss - gen.aux_loss  # MLM alone
        with torch.no_grad():
            sampled = gumbel_sample(gen.logits.detach(), self.temperature)
            corrupted = input_ids.clone()
            corrupted[masked] = sampled
            original = torch.where(masked, labels, input_ids)
            replaced = corrupted != original
        disc = self.discriminator(corrupted, attention_mask, token_type_ids, labels=replaced.long())
        disc_loss = disc.loss if disc.aux_loss is None else disc.loss - disc.aux_loss  # RTD alone
        loss = gen_loss + self.disc_weight * disc_loss
        # MoE balancing losses of either model are added once, not scaled by disc_weight
        aux = [x for x in (gen.aux_loss, disc.aux_loss) if x is not None]
        aux_loss = sum(aux) if aux else None
        if aux_loss is not None:
            loss = loss + aux_loss
        return ElectraPreTrainingOutput(loss, gen_loss, disc_loss, gen.logits, disc.logits, replaced,
                                        corrupted, aux_loss)

    # ------------------------------------------------------------------ checkpoints
    def save_pretrained(self, directory: str | os.PathLike, tokenizer: Any = None) -> None:
        """The pair (for resuming) plus `discriminator/` and `generator/` for transformers."""
        directory = os.fspath(directory)
        super().save_pretrained(directory, tokenizer)
        self.discriminator.save_pretrained(os.path.join(directory, "discriminator"), tokenizer)
        self.generator.save_pretrained(os.path.join(directory, "generator"), tokenizer)


def build_pretrainer(config: BertConfig, settings: ElectraSettings | None = None) -> ElectraPretrainer:
    """The pair the "electra" objective trains: `config` is the discriminator's, the generator
    is scaled down from it as `settings` say."""
    s = settings or ElectraSettings()
    generator = generator_config(config, s.generator_hidden_fraction, s.generator_layers or None)
    return ElectraPretrainer(config, generator, disc_weight=s.disc_weight, temperature=s.temperature)


@torch.no_grad()
def evaluate_electra(model: ElectraPretrainer, batches, seed: int = 0) -> dict:
    """Held-out metrics of the pair on pre-masked MLM `batches`, over all positions at once:

        generator_loss      = mean over masked positions of -log p_G(x_t)  (also mlm_loss)
        perplexity          = exp(generator_loss)
        mlm_accuracy        = share of masked positions where argmax p_G = x_t
        mlm_replaced_accuracy  the same over the masked positions whose input was replaced
                            ([MASK] or a random token; metrics.py says why it is the one to read)
        discriminator_loss  = mean over real tokens of the replaced-token BCE
        rtd_accuracy        = share of real tokens whose replaced / original call is right
        rtd_recall          = share of the replaced tokens the discriminator calls replaced
        replaced_fraction   = share of real tokens the generator's samples changed

    The generator's samples are drawn from a generator seeded with `seed`, so every evaluation of
    a run corrupts the same way given the same generator weights.
    """
    device = next(model.parameters()).device
    fork = [device] if device.type == "cuda" else []
    gen_sum = disc_sum = 0.0
    masked_n = gen_correct = real_n = disc_correct = replaced_n = detected = replaced_hits = masked_replaced = 0
    with torch.random.fork_rng(devices=fork):
        torch.manual_seed(seed)
        for batch in batches:
            batch = {k: v.to(device) for k, v in batch.items()}
            labels = batch["labels"]
            out = model(batch["input_ids"], labels, batch.get("attention_mask"), batch.get("token_type_ids"))
            targets = labels[labels != IGNORE_INDEX]
            gen_sum += float(F.cross_entropy(out.generator_logits.float(), targets, reduction="sum"))
            hits = out.generator_logits.argmax(-1) == targets
            gen_correct += int(hits.sum())
            masked_n += targets.numel()
            was_replaced = batch["input_ids"][labels != IGNORE_INDEX] != targets
            replaced_hits += int(hits[was_replaced].sum())
            masked_replaced += int(was_replaced.sum())
            mask = batch.get("attention_mask")
            real = mask.bool() if mask is not None else torch.ones_like(labels, dtype=torch.bool)
            logits, replaced = out.discriminator_logits[real].float(), out.replaced[real]
            disc_sum += float(F.binary_cross_entropy_with_logits(logits, replaced.float(), reduction="sum"))
            called = logits > 0
            disc_correct += int((called == replaced).sum())
            real_n += replaced.numel()
            replaced_n += int(replaced.sum())
            detected += int((called & replaced).sum())
    if masked_n == 0 or real_n == 0:
        return {}
    gen_loss = gen_sum / masked_n
    return {"generator_loss": gen_loss, "mlm_loss": gen_loss, "perplexity": math.exp(min(gen_loss, 50.0)),
            "mlm_accuracy": gen_correct / masked_n, "mlm_replaced_accuracy": replaced_hits / max(1, masked_replaced),
            "discriminator_loss": disc_sum / real_n, "rtd_accuracy": disc_correct / real_n,
            "rtd_recall": detected / max(1, replaced_n), "replaced_fraction": replaced_n / real_n}


METRICS = ("generator_loss", "mlm_loss", "perplexity", "mlm_accuracy", "mlm_replaced_accuracy", "discriminator_loss",
           "rtd_accuracy", "rtd_recall", "replaced_fraction")  # evaluate_electra's, for the registry entry
