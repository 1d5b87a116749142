"""`bertkit predict --model DIR --input FILE --output FILE.jsonl`: one JSON row per input.

Rows: classification {"label", "probabilities"}; multi-label {"labels", "probabilities"};
regression {"value"}; token classification {"words", "tags", "entities": [{"type", "start",
"end", "text"}]} with character offsets into the input text; QA {"id", "answer", "start",
"end", "score", "no_answer"} with offsets into the context; multiple choice {"id", "choice",
"text", "probabilities"}. An output named .csv or .tsv is a table of the same rows, one per input
(a dict of values such as the probabilities one column per key, lists as JSON text:
bertkit/table_output.py), for a spreadsheet.

The rows are written as they are computed, a chunk of inputs at a time (the first 256, then
4,096: `prediction_chunks` in bertkit/tasks/inference.py): with `--output -` each chunk's rows
reach stdout (flushed) as soon as they are done, so `bertkit predict ... --output - | head`
shows rows after the first chunk, and the run stops at the next chunk once head has enough
(exit 141); nothing else goes to stdout. A failure in a later chunk leaves the earlier chunks'
rows on stdout and exits non-zero. A file output is written to a temporary file beside it,
renamed into place at the end: a failed or interrupted run leaves no partial file and an
earlier file as it was. Only one chunk's features and rows are held in memory.

One row per input, in input order: every row starts with "index" (0-based) and "line" (where
the input starts in its file; null for SQuAD JSON, built-in data and a folder), then, for a folder of
.txt files (one text each, at any depth, sorted by path; a folder of class folders too, its labels
unused), "file": the file's path in the folder; an empty file is a blank input. A blank or
whitespace-only line (a blank JSONL line too; or text, either text of a pair, question, context) is an input too: its row has the task's keys
with null values (no label, no value, no words, no answer) instead of being dropped. A file
with no non-blank input at all is refused. SQuAD questions whose gold answer is not in the
context are predicted like the others (the gold answers are not used).
"""

from __future__ import annotations

from bertkit.errors import ConfigError
from bertkit.inference.quantize import inference_copy
from bertkit.table_output import rows_writer
from bertkit.tasks import (TASKS, inference_spec, load_inference_model, prediction_chunks, read_prediction_input,
                           showing_progress, summing_truncations)
from bertkit.tokenizer.coverage import warn_about_unknown_texts

from bertkit.commands.options import (STDOUT, add_device, add_int8, add_no_blend, add_precision, add_progress,
                                      add_set, add_task_module, check_output_files, device_of, resolve_models,
                                      running_in, replacing_note, stream_output)


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="fine-tuned model directory")
    parser.add_argument("--input", required=True,
                        help="texts (.txt one per line, .csv/.tsv/.jsonl, a folder of .txt files), CoNLL, SQuAD .json / "
                             "QA .jsonl, multiple-choice .jsonl, or built-in NAME[:split]")
    parser.add_argument("--output", required=True, help="where to write the predictions (.jsonl; a .csv or .tsv name: a table, "
                                                          "one row per input); - for stdout")
    parser.add_argument("--task", choices=TASKS, help="default: the task the model was fine-tuned for")
    add_task_module(parser)
    add_set(parser, "data.text_column=body")
    add_int8(parser)
    add_device(parser)
    add_precision(parser)
    add_progress(parser)
    add_no_blend(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    if args.input == STDOUT:  # "-" reads as stdin beside --output -, but inputs are files (their format by extension)
        raise ConfigError("--input -: predict reads a file, not stdin; save the texts to a .txt file (one per "
                          "line) and pass its path, e.g. --input new.txt (--output - does write to stdout)")
    check_output_files(args)  # before any work: a folder, or a file the command reads
    replaced = replacing_note(args.output)
    device = device_of(args)  # before the model loads
    spec = inference_spec(args.model, args.task, args.set)
    if args.no_blend:
        spec.blend = None
    inputs = read_prediction_input(spec.task, args.input, spec.data)  # bad input refused before the model loads
    model, tokenizer = load_inference_model(args.model, spec)
    texts = [text for text in (getattr(example, "text", None) for example in inputs.examples) if isinstance(text, str)]
    warn_about_unknown_texts(texts, tokenizer, args.model, f"texts of {args.input}", "one prediction")
    model = inference_copy(model, tokenizer, args.int8, device, args.precision)
    written = 0
    # a bar over the inputs (stderr); one truncation warning for the whole input, at its end
    with (running_in(args, device), showing_progress(None if args.no_progress else "predict", len(inputs.examples)),
          summing_truncations(), stream_output(args.output) as out):
        writer = rows_writer(out, args.output)  # JSON lines, or a table for an output named .csv/.tsv
        for rows in prediction_chunks(model, tokenizer, spec, inputs, name=args.input):
            writer.write(rows)
            out.flush()  # a reader of stdout gets each chunk's rows now, not at the end
            written += len(rows)
        writer.flush()
    if args.output != STDOUT:  # on stdout the rows are the whole output
        blended = f" (the model blended with TF-IDF, {spec.blend.settings})" if spec.blend is not None else ""
        print(f"wrote {written} predictions to {args.output}{blended}{replaced}")
    return 0
