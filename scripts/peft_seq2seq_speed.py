"""Seconds per training step (forward + backward + AdamW) of full fine-tuning and LoRA on the seq2seq
task's BERT2BERT: MiniLM, decoder_layers=3, cross-attention copied from self-attention, batch 32 of
wordnet-definitions training pairs at data.max_length=16 / data.max_target_length=24 (the settings of
docs/results.md's run), measured interleaved in one process; and each one's trainable parameters.

    OMP_NUM_THREADS=1 python scripts/peft_seq2seq_speed.py
"""
import time
import warnings

import torch

from bertkit.data.assets import minilm_dir
from bertkit.peft import LoraConfig, get_peft_model
from bertkit.tasks import Collator, DataConfig, get_task
from bertkit.tasks.builtin import builtin_splits
from bertkit.tokenizer import Tokenizer

warnings.simplefilter("ignore")
torch.set_num_threads(1)
task, data = get_task("seq2seq"), DataConfig(max_length=16, max_target_length=24)
tokenizer = Tokenizer.from_pretrained(minilm_dir())
examples = builtin_splits("wordnet-definitions")["train"][:32]
batch = Collator(tokenizer.pad_token_id)(task.encode(tokenizer, examples, data, None, True))
inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids", "labels")}
overrides = {"decoder_layers": 3, "cross_attention_init": "self_attention", "hidden_dropout_prob": 0.0,
             "attention_probs_dropout_prob": 0.0}


def build(lora: bool):
    torch.manual_seed(0)
    model = task.build_model(minilm_dir(), task, None, overrides)
    model = (get_peft_model(model, LoraConfig()) if lora else model).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    return model, torch.optim.AdamW(trainable, lr=1e-5), sum(p.numel() for p in trainable)


runs = {"full": build(False), "lora": build(True)}
times = {name: [] for name in runs}
for round in range(7):
    for name, (model, optimizer, _) in runs.items():
        start = time.perf_counter()
        model(**inputs).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if round:  # the first round warms up
            times[name].append(time.perf_counter() - start)
full = sorted(times["full"])[len(times["full"]) // 2]
for name, seconds in times.items():
    median = sorted(seconds)[len(seconds) // 2]
    total = sum(p.numel() for p in runs[name][0].parameters())
    print(f"{name:5s} median {median:.2f} s/step ({median / full:.2f} x full); "
          f"trainable {runs[name][2]:,} of {total:,}")
