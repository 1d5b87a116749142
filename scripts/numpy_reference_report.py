"""Print how far the plain-NumPy BERT (bertkit/reference/numpy_bert.py) is from bertkit's BertModel.

    .venv/bin/python scripts/numpy_reference_report.py

MiniLM (real weights) on the padded batch of real sentences scripts/parity_report.py uses, with
the reference computing in float32 and in float64. Differences are max |a - b| over real tokens.
"""

import time

import numpy as np
import torch

import bertkit
from bertkit.data.assets import minilm_dir
from bertkit.reference import numpy_bert

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.",
             "The new movie is awesome, said the critic who had seen it twice on Sunday.",
             "Shares in the company fell sharply after the announcement."]


def rows():
    directory = minilm_dir()
    model = bertkit.BertModel.from_pretrained(directory)
    batch = bertkit.Tokenizer.from_pretrained(directory)(SENTENCES, return_tensors="np")
    real = batch["attention_mask"][..., None].astype(bool)
    inputs = {k: torch.from_numpy(batch[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        theirs = model(**inputs, output_attentions=True, output_hidden_states=True)
    for dtype in (np.float32, np.float64):
        config, weights = numpy_bert.load(directory, dtype=dtype)
        start = time.perf_counter()
        ours = numpy_bert.forward(batch["input_ids"], weights, config, batch["attention_mask"],
                                  batch["token_type_ids"])
        seconds = time.perf_counter() - start
        name = np.dtype(dtype).name
        yield f"{name} last_hidden_state", np.abs(np.where(real, ours.last_hidden_state - theirs.last_hidden_state.double().numpy(), 0)).max()
        yield f"{name} pooler_output", np.abs(ours.pooler_output - theirs.pooler_output.double().numpy()).max()
        yield f"{name} hidden_states (all 7)", max(np.abs(np.where(real, a - b.double().numpy(), 0)).max()
                                                   for a, b in zip(ours.hidden_states, theirs.hidden_states))
        yield f"{name} attentions (all 6 layers)", max(np.abs(a - b.double().numpy()).max()
                                                       for a, b in zip(ours.attentions, theirs.attentions))
        print(f"# {name} forward of {batch['input_ids'].shape} took {seconds:.2f} s")


if __name__ == "__main__":
    torch.set_num_threads(1)
    table = list(rows())
    print("\n| NumPy reference vs BertModel | max abs difference |\n|---|---|")
    for label, value in table:
        print(f"| {label} | {value:.1e} |")
