"""How far MiniLM with new Linformer projections is from dense MiniLM before any training.

Eight BBC training articles (512 tokens at most) through all-MiniLM-L6-v2 dense, and with
`attention_low_rank = 128` under each start of E, F: fairseq's Xavier init and segment means over
512 positions (`variants.linformer.init_segment_means`, what `bertkit finetune` uses when it adds
the projections to a dense checkpoint). Printed: the cosine similarity of each article's
mean-pooled embedding to its dense one, and for scale, the dense cosine of article 0 to the others.

    python scripts/linformer_init.py [--rank 128] [--length 512] [--threads 1]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from bertkit.data.assets import minilm_dir
from bertkit.models.encoder import BertModel
from bertkit.tasks.realdata import bbc_topics
from bertkit.tokenizer import Tokenizer
from bertkit.models.variants.linformer import init_segment_means


def pooled(model: BertModel, batch) -> torch.Tensor:
    with torch.no_grad():
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return (hidden * mask).sum(1) / mask.sum(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, default=128)
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    directory = minilm_dir()
    texts = [example.text for example in bbc_topics(0)["train"][:8]]
    batch = Tokenizer.from_pretrained(directory)(texts, max_length=args.length, truncation=True, padding=True)
    print("real lengths", batch["attention_mask"].sum(1).tolist())
    dense = pooled(BertModel.from_pretrained(directory), batch)
    for start in ("xavier", "segment_means"):
        torch.manual_seed(0)
        model = BertModel.from_pretrained(directory, attention_low_rank=args.rank)
        if start == "segment_means":
            init_segment_means(model, args.length)
        cosine = F.cosine_similarity(pooled(model, batch), dense)
        print(f"{start:>13}: cosine to dense {' '.join(f'{c:.2f}' for c in cosine.tolist())} "
              f"(mean {cosine.mean():.2f})")
    others = F.cosine_similarity(dense[:1], dense[1:])
    print(f"dense, article 0 to the others: {' '.join(f'{c:.2f}' for c in others.tolist())}")


if __name__ == "__main__":
    main()
