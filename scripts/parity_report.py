"""Print the measured bertkit-vs-transformers differences as a markdown table.

    .venv/bin/python scripts/parity_report.py

MiniLM (real weights) on a padded batch of real sentences, and a random model with each head
saved by bertkit and loaded by transformers. Differences are max |a - b| over real tokens.
"""

import tempfile
import warnings

import torch
import transformers

import bertkit
from bertkit.data.assets import minilm_dir

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.",
             "The new movie is awesome, said the critic who had seen it twice on Sunday.",
             "Shares in the company fell sharply after the announcement."]


def masked_max(a, b, mask):
    return (a - b).abs().masked_select(mask[..., None].bool()).max().item()


def minilm_rows():
    d = minilm_dir()
    ours = bertkit.BertModel.from_pretrained(d)
    theirs = transformers.BertModel.from_pretrained(d, attn_implementation="eager").eval()
    batch = transformers.BertTokenizerFast.from_pretrained(d)(SENTENCES, padding=True, return_tensors="pt")
    mask = batch["attention_mask"]
    with torch.no_grad():
        a = ours(**batch, output_attentions=True, output_hidden_states=True)
        b = theirs(**batch, output_attentions=True, output_hidden_states=True)
        fast = ours(**batch).last_hidden_state
    yield "MiniLM last_hidden_state (SDPA path)", masked_max(fast, b.last_hidden_state, mask)
    yield "MiniLM last_hidden_state (explicit path)", masked_max(a.last_hidden_state, b.last_hidden_state, mask)
    yield "MiniLM pooler_output", (a.pooler_output - b.pooler_output).abs().max().item()
    yield "MiniLM hidden_states (all 7)", max(masked_max(x, y, mask) for x, y in zip(a.hidden_states, b.hidden_states))
    yield "MiniLM attentions (all 6 layers x 12 heads)", max((x - y).abs().max().item() for x, y in zip(a.attentions, b.attentions))


def head_rows():
    config = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=64)
    ids = torch.randint(5, 99, (3, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, -4:] = 0
    for name, field in [("BertForMaskedLM", "logits"), ("BertForPreTraining", "prediction_logits"),
                        ("BertForSequenceClassification", "logits"),
                        ("BertForTokenClassification", "logits"),
                        ("BertForQuestionAnswering", "start_logits")]:
        torch.manual_seed(0)
        ours = getattr(bertkit, name)(bertkit.BertConfig(**config)).eval()
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours.save_pretrained(d)
            theirs = getattr(transformers, name).from_pretrained(d).eval()
            with torch.no_grad():
                x, y = getattr(ours(ids, mask), field), getattr(theirs(ids, mask), field)
        diff = masked_max(x, y, mask) if x.dim() == 3 else (x - y).abs().masked_select(mask.bool()).max().item() \
            if x.shape == mask.shape else (x - y).abs().max().item()
        yield f"{name} saved by bertkit, loaded by transformers ({field})", diff


if __name__ == "__main__":
    torch.set_num_threads(2)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}\n")
    print("| output | max abs difference |\n|---|---|")
    for label, value in [*minilm_rows(), *head_rows()]:
        print(f"| {label} | {value:.1e} |")
