"""`bertkit probe --model DIR --task TASK --out DIR [--level sentence|token] [--limit N] [--control] [--random-init]`.

Linear probes on every layer of a frozen encoder (layer 0 = the embeddings). TASK is built in
(WordNet, Debian `wordnet-base`):
- `wordnet-supersense` (sentence level): a synset's gloss definition, mean-pooled over its
  tokens -> its supersense (45 lexicographer files, e.g. noun.person).
- `wordnet-tokens` (token level): the words of WordNet example sentences that spell the
  exemplified lemma (e.g. "drum up" in "drum up support") -> the synset's supersense.
or a FILE: .csv/.tsv/.jsonl with `text` and `label` columns (sentence level) or a CoNLL file
(token level: every word -> its tag). A test split is held out (sentence level: stratified by
label; token level: by sentence). --control adds Hewitt & Liang's control task (selectivity =
accuracy - control accuracy); --random-init repeats everything on the same architecture with
random weights.

Writes OUT/results.jsonl (one row per encoder and layer), OUT/probe.png and OUT/summary.json,
and prints the per-layer table. The analysis is bertkit/analysis/probe_run.py (data side:
probe_data.py).
"""

from __future__ import annotations

from bertkit.analysis.probe_run import ProbeSettings, run_probe
from bertkit.commands.options import add_device, add_seed, add_set, device_of, resolve_models, say
from bertkit.settings.config_io import apply_overrides


def add_arguments(parser) -> None:
    defaults = ProbeSettings()
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--data", "--task", dest="data", required=True,  # --task: its name before 0.2
                        help="the labelled data to probe: wordnet-supersense, wordnet-tokens, or a file (.csv/.tsv/.jsonl: text,label; "
                             "otherwise CoNLL: word ... tag)")
    parser.add_argument("--out", required=True, help="directory for results.jsonl, probe.png, summary.json")
    parser.add_argument("--level", choices=("sentence", "token"),
                        help="probe pooled sentences or single words (default: from the task)")
    parser.add_argument("--limit", type=int, default=None,
                        help="use at most N examples (glosses / sentences), after a seeded shuffle (default: all)")
    parser.add_argument("--control", action="store_true", help="add the control task and report selectivity")
    parser.add_argument("--random-init", action="store_true",
                        help="also probe the same architecture with random weights (baseline)")
    parser.add_argument("--pooling", help="sentence: mean (default) or cls; token: first (default) or mean sub-word")
    parser.add_argument("--test-fraction", type=float, default=defaults.test_fraction,
                        help="share held out for testing")
    parser.add_argument("--weight-decay", type=float, default=defaults.weight_decay, help="L2 penalty of the probes")
    parser.add_argument("--max-length", type=int, default=defaults.max_length,
                        help="tokens per input (longer ones are cut)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    add_set(parser, "data.text_column=body data.label_column=topic (a table's columns)")
    add_seed(parser, f"data shuffle, split, control labels, random init; default {defaults.seed}")
    parser.set_defaults(seed=defaults.seed)
    add_device(parser)


PROBE_KEYS = {"data": ("text_column", "label_column")}  # what --set takes: a table's columns


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    columns = apply_overrides({}, args.set, PROBE_KEYS).get("data", {})
    settings = ProbeSettings(**columns, level=args.level, limit=args.limit, control=args.control, random_init=args.random_init,
                             pooling=args.pooling, test_fraction=args.test_fraction, weight_decay=args.weight_decay,
                             max_length=args.max_length, batch_size=args.batch_size, seed=args.seed,
                             device=str(device_of(args)))
    run_probe(args.model, args.data, args.out, settings, log=say)
    return 0
