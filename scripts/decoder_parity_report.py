"""Print the decoder side's measured bertkit-vs-transformers differences as a markdown table.

    .venv/bin/python scripts/decoder_parity_report.py

Real weights: a BERT2BERT warm-started by bertkit from all-MiniLM-L6-v2 (encoder and decoder;
the cross-attention layers and the LM head's transform are new, seeded), saved and loaded by
transformers' EncoderDecoderModel, and the other way round; and MiniLM as a causal LM
(BertLMHeadModel). Differences are max |a - b| over real tokens; generation rows count the inputs
whose generated ids are identical.
"""

import tempfile
import warnings

import torch
import transformers

from bertkit import BertLMHeadModel, EncoderDecoderModel
from bertkit.data.assets import minilm_dir

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.",
             "The new movie is awesome, said the critic who had seen it twice on Sunday.",
             "Shares in the company fell sharply after the announcement."]
TARGETS = ["food", "a piece of bread", "an awesome movie", "shares fell"]


def masked_max(a, b, mask):
    return (a - b).abs()[mask.bool()].max().item()


def seq2seq_rows(directory, tokenizer):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = EncoderDecoderModel.from_encoder_decoder_pretrained(
            minilm_dir(), minilm_dir(), decoder_start_token_id=tokenizer.cls_token_id,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id).eval()
        ours.save_pretrained(f"{directory}/ours")
        theirs = transformers.EncoderDecoderModel.from_pretrained(f"{directory}/ours",
                                                                  attn_implementation="eager").eval()
        theirs.save_pretrained(f"{directory}/theirs")
        back = EncoderDecoderModel.from_pretrained(f"{directory}/theirs")
    source = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    target = tokenizer(TARGETS, padding=True, return_tensors="pt")
    inputs = dict(input_ids=source["input_ids"], attention_mask=source["attention_mask"],
                  decoder_input_ids=target["input_ids"], decoder_attention_mask=target["attention_mask"],
                  output_attentions=True)
    dmask = target["attention_mask"]
    with torch.no_grad():
        a, b, c = ours(**inputs), theirs(**inputs), back(**inputs)
        encoded = ours.encoder(source["input_ids"], source["attention_mask"])
        cache, steps = None, []
        for t in range(dmask.shape[1]):
            out = ours(attention_mask=source["attention_mask"], decoder_input_ids=target["input_ids"][:, t:t + 1],
                       decoder_attention_mask=dmask[:, :t + 1], encoder_outputs=encoded, past_key_values=cache,
                       use_cache=True)
            cache = out.past_key_values
            steps.append(out.logits)
    yield "BERT2BERT (MiniLM) saved by bertkit, loaded by transformers: logits", masked_max(a.logits, b.logits, dmask)
    yield "the same, loaded back into bertkit from transformers' save: logits", masked_max(c.logits, b.logits, dmask)
    yield "encoder last_hidden_state", masked_max(a.encoder_last_hidden_state, b.encoder_last_hidden_state,
                                                  source["attention_mask"])
    yield "decoder self-attentions (6 layers x 12 heads, causal)", max(
        masked_max(x.transpose(1, 2), y.transpose(1, 2), dmask) for x, y in zip(a.decoder_attentions, b.decoder_attentions))
    yield "cross-attentions (6 layers x 12 heads)", max(
        masked_max(x.transpose(1, 2), y.transpose(1, 2), dmask) for x, y in zip(a.cross_attentions, b.cross_attentions))
    yield "bertkit KV-cached steps vs one pass: logits", masked_max(torch.cat(steps, 1), a.logits, dmask)
    for options in (dict(num_beams=1), dict(num_beams=4), dict(num_beams=4, length_penalty=2.0, early_stopping=True)):
        mine = ours.generate(source["input_ids"], source["attention_mask"], max_new_tokens=12, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = theirs.generate(source["input_ids"], attention_mask=source["attention_mask"], max_new_tokens=12,
                                  do_sample=False, **options)
        same = sum(x == y for x, y in zip(mine.tolist(), ref.tolist()))
        yield f"BERT2BERT generate {options}: identical outputs", f"{same} of {len(SENTENCES)}"


def causal_lm_rows(tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        ours = BertLMHeadModel.from_pretrained(minilm_dir(), is_decoder=True)
        theirs = transformers.BertLMHeadModel.from_pretrained(minilm_dir(), is_decoder=True,
                                                              attn_implementation="eager").eval()
        theirs.cls.load_state_dict(ours.cls.state_dict(), strict=False)  # the same (new) head transform
        theirs.cls.predictions.decoder.bias = theirs.cls.predictions.bias
    tokenizer.padding_side = "left"
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    positions = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"], position_ids=positions).logits
        b = theirs(batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=positions).logits
    yield "MiniLM as BertLMHeadModel, left-padded prompts: logits", masked_max(a, b, batch["attention_mask"])
    for options in (dict(num_beams=1), dict(num_beams=3)):
        mine = ours.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=10, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = theirs.generate(**batch, max_new_tokens=10, do_sample=False, **options)
        same = sum(x == y for x, y in zip(mine.tolist(), ref.tolist()))
        yield f"causal LM generate {options}: identical outputs", f"{same} of {len(SENTENCES)}"


def main():
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()  # its report of the (expected) new head weights
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir())
    print("| output | max abs difference |\n|---|---|")
    with tempfile.TemporaryDirectory() as directory:
        for name, value in [*seq2seq_rows(directory, tokenizer), *causal_lm_rows(tokenizer)]:
            print(f"| {name} | {value if isinstance(value, str) else f'{value:.1e}'} |")


if __name__ == "__main__":
    main()
