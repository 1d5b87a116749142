"""Same weights, same outputs: bertkit against `transformers` in both directions."""

import warnings

import pytest
import torch

import bertkit

transformers = pytest.importorskip("transformers")

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome, said the critic who had seen it twice on Sunday.",
    "Shares in the company fell sharply after the announcement.",
]


@pytest.fixture(scope="module")
def minilm_pair(minilm_dir):
    ours = bertkit.BertModel.from_pretrained(minilm_dir)
    theirs = transformers.BertModel.from_pretrained(minilm_dir, attn_implementation="eager").eval()
    tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    return ours, theirs, batch


def max_diff_on_real_tokens(a, b, mask):
    return (a - b).abs().masked_select(mask[..., None].bool()).max().item()


def test_minilm_matches_transformers_every_output(minilm_pair):
    ours, theirs, batch = minilm_pair
    assert batch["attention_mask"].min() == 0, "the batch must contain padding"
    with torch.no_grad():
        a = ours(**batch, output_attentions=True, output_hidden_states=True)
        b = theirs(**batch, output_attentions=True, output_hidden_states=True)
    mask = batch["attention_mask"]
    assert max_diff_on_real_tokens(a.last_hidden_state, b.last_hidden_state, mask) < 1e-5
    assert (a.pooler_output - b.pooler_output).abs().max() < 1e-5
    assert len(a.hidden_states) == len(b.hidden_states) == 7
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert max_diff_on_real_tokens(x, y, mask) < 1e-5
    assert len(a.attentions) == 6
    for x, y in zip(a.attentions, b.attentions):
        assert x.shape == y.shape == (4, 12, mask.shape[1], mask.shape[1])
        assert (x - y).abs().max() < 1e-5


def test_fast_path_equals_explicit_path(minilm_pair):
    ours, _, batch = minilm_pair
    with torch.no_grad():
        fast = ours(**batch).last_hidden_state
        explicit = ours(**batch, output_attentions=True).last_hidden_state
    assert max_diff_on_real_tokens(fast, explicit, batch["attention_mask"]) < 1e-5


def test_head_mask_equals_removing_the_heads(minilm_pair):
    # transformers 5 no longer takes head_mask, so the reference is the definition itself:
    # a masked head contributes nothing, exactly as if its columns of the output projection
    # were zero.
    import copy

    ours, _, batch = minilm_pair
    head_mask = torch.ones(6, 12)
    head_mask[0, :3] = 0
    head_mask[4, 5] = 0
    pruned = copy.deepcopy(ours)
    d = pruned.config.head_dim
    with torch.no_grad():
        for layer, head in (head_mask == 0).nonzero().tolist():
            dense = pruned.encoder.layer[layer].attention.output.dense
            dense.weight[:, head * d:(head + 1) * d] = 0
        a = ours(**batch, head_mask=head_mask).last_hidden_state
        b = pruned(**batch).last_hidden_state
        unmasked = ours(**batch).last_hidden_state
    mask = batch["attention_mask"]
    assert max_diff_on_real_tokens(a, b, mask) < 1e-5
    assert max_diff_on_real_tokens(a, unmasked, mask) > 1e-2


TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, type_vocab_size=2,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

# bertkit class, transformers class, config changes, names of the outputs to compare
HEADS = [
    ("BertModel", {}, ["last_hidden_state", "pooler_output"]),
    ("BertForMaskedLM", {}, ["logits"]),
    ("BertForPreTraining", {}, ["prediction_logits", "seq_relationship_logits"]),
    ("BertForNextSentencePrediction", {}, ["logits"]),
    ("BertForSequenceClassification", {"num_labels": 3}, ["logits"]),
    ("BertForSequenceClassification", {"num_labels": 1}, ["logits"]),
    ("BertForTokenClassification", {"num_labels": 5}, ["logits"]),
    ("BertForQuestionAnswering", {}, ["start_logits", "end_logits"]),
    ("BertForMultipleChoice", {}, ["logits"]),
]


def random_inputs(name):
    g = torch.Generator().manual_seed(1)
    shape = (2, 3, 11) if name == "BertForMultipleChoice" else (3, 11)
    ids = torch.randint(5, TINY["vocab_size"], shape, generator=g)
    mask = torch.ones(shape, dtype=torch.long)
    mask[..., -3:] = 0
    mask[0, ..., -5:] = 0
    types = torch.zeros(shape, dtype=torch.long)
    types[..., 6:] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def compare(a, b, outputs, mask):
    for name in outputs:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        if x.dim() >= 2 and x.shape[:2] == mask.shape[:2] and x.dim() > mask.dim():
            diff = max_diff_on_real_tokens(x, y, mask)
        elif x.shape == mask.shape:
            diff = (x - y).abs().masked_select(mask.bool()).max().item()
        else:
            diff = (x - y).abs().max().item()
        assert diff < 1e-5, f"{name} differs by {diff}"


@pytest.mark.parametrize("name,changes,outputs", HEADS, ids=[f"{h[0]}-{h[1]}" for h in HEADS])
def test_bertkit_checkpoint_loads_in_transformers(tmp_path, name, changes, outputs):
    torch.manual_seed(0)
    ours = getattr(bertkit, name)(bertkit.BertConfig(**TINY, **changes)).eval()
    ours.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(transformers, name).from_pretrained(tmp_path, attn_implementation="eager").eval()
    inputs = random_inputs(name)
    with torch.no_grad():
        compare(ours(**inputs), theirs(**inputs), outputs, inputs["attention_mask"])


@pytest.mark.parametrize("name,changes,outputs", HEADS, ids=[f"{h[0]}-{h[1]}" for h in HEADS])
def test_transformers_checkpoint_loads_in_bertkit(tmp_path, name, changes, outputs):
    torch.manual_seed(0)
    config = transformers.BertConfig(**TINY, **changes)
    theirs = getattr(transformers, name)(config).eval()
    theirs.save_pretrained(tmp_path)
    ours, report = getattr(bertkit, name).from_pretrained(tmp_path, output_loading_info=True)
    assert report.missing_keys == [] and report.unexpected_keys == []
    inputs = random_inputs(name)
    with torch.no_grad():
        compare(ours(**inputs), theirs(**inputs), outputs, inputs["attention_mask"])


def test_losses_match_transformers(tmp_path):
    torch.manual_seed(0)
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**TINY)).eval()
    theirs.save_pretrained(tmp_path)
    ours = bertkit.BertForPreTraining.from_pretrained(tmp_path)
    inputs = random_inputs("BertForPreTraining")
    labels = torch.full_like(inputs["input_ids"], -100)
    labels[:, 2:5] = inputs["input_ids"][:, 2:5]
    nsp = torch.tensor([0, 1, 1])
    with torch.no_grad():
        a = ours(**inputs, labels=labels, next_sentence_label=nsp)
        b = theirs(**inputs, labels=labels, next_sentence_label=nsp)
    assert abs(a.loss.item() - b.loss.item()) < 1e-5
    # Logits at the labelled positions only equal the full logits gathered there.
    assert a.prediction_logits.shape == (9, TINY["vocab_size"])
    assert (a.prediction_logits - b.prediction_logits[labels != -100]).abs().max() < 1e-5
