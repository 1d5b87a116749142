"""How far apart PEFT's and bertkit's prefix-tuning conventions are on the same prefixes.

PEFT's prefix tuning on transformers' BERT passes the prefixes as a past key/value cache, and
transformers then numbers the sequence's positions from P (the cache length). bertkit's default
numbers them from 0. This prints the largest logit difference between PEFT and bertkit on the
same random tiny classifier and prefixes, with bertkit's positions from 0 and shifted by P.

    python scripts/peft_prefix_positions.py
"""

import tempfile
import warnings

import torch

import bertkit
from bertkit.peft import PrefixConfig, get_peft_model
from bertkit.peft.io import key_values_of


def main() -> None:
    import peft
    import transformers

    torch.manual_seed(0)
    config = bertkit.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, num_labels=3)
    with tempfile.TemporaryDirectory() as base:
        bertkit.BertForSequenceClassification(config).save_pretrained(base)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf = transformers.BertForSequenceClassification.from_pretrained(base).eval()
        theirs = peft.get_peft_model(hf, peft.PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=5)).eval()
        prompt = theirs.prompt_encoder["default"].embedding.weight
        with torch.no_grad():
            prompt.normal_(0, 1.0)
        ids = torch.tensor([[2, 5, 7, 9, 11, 3], [2, 8, 6, 3, 0, 0]])
        mask = (ids != 0).long()
        for shift in (False, True):
            ours = get_peft_model(bertkit.BertForSequenceClassification.from_pretrained(base),
                                  PrefixConfig(num_virtual_tokens=5, init="normal", shift_positions=shift)).eval()
            with torch.no_grad():
                ours.prefixes.encoders["default"].key_values.copy_(key_values_of(prompt.detach(), 2))
                ours.model.classifier.copies["default"].load_state_dict(
                    theirs.base_model.classifier.modules_to_save["default"].state_dict())
                gap = (ours(input_ids=ids, attention_mask=mask).logits
                       - theirs(input_ids=ids, attention_mask=mask).logits).abs().max()
            print(f"shift_positions={shift}: max |logit difference| = {float(gap):.2e}")


if __name__ == "__main__":
    main()
