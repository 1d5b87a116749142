"""`bertkit tokenize --model DIR "text" [--pair "text"]`: show tokens, ids, segments, word ids."""

from __future__ import annotations

import json
import sys
import warnings

from bertkit.errors import DataError
from bertkit.tokenizer import Tokenizer
from bertkit.commands.options import resolve_models


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model or tokenizer directory")
    parser.add_argument("text", nargs="?", help="the text; read from stdin when omitted (all of it, one text, "
                                                "without the last line end)")
    parser.add_argument("--pair", help="a second text for a pair input")
    parser.add_argument("--max-length", type=int, default=None, help="cut the input to this many tokens "
                                                                     "(default: no cut)")
    parser.add_argument("--json", action="store_true", help="one JSON object per text")


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    specials = 3 if args.pair is not None else 2  # [CLS] text [SEP] (pair [SEP]): below one more, no cut happens
    if args.max_length is not None and args.max_length <= specials:
        raise DataError(f"--max-length must be at least {specials + 1} (the {specials} special tokens and one of the "
                        f"text), got {args.max_length}")
    tok = Tokenizer.from_pretrained(args.model)
    text = args.text if args.text is not None else stdin_text()
    with warnings.catch_warnings():  # the tokenizer's note speaks to Python callers; ours below to this one
        warnings.simplefilter("ignore")
        # no --max-length: the whole text, as the option's help says (not the model's 512)
        enc = tok([text], [args.pair] if args.pair is not None else None, padding=False,
                  truncation=args.max_length is not None, max_length=args.max_length, return_word_ids=True,
                  return_offsets=True, return_tensors=None)
        full = len(tok.encode(text, args.pair))
    if full > len(enc["input_ids"][0]):
        warnings.warn(f"the text has {full} tokens; shown are the first {len(enc['input_ids'][0])} "
                      f"(--max-length {args.max_length}): raise --max-length or leave it out to see them all")
    elif tok.model_max_length and full > tok.model_max_length:  # all shown: say where a model stops reading
        warnings.warn(f"the text has {full} tokens, more than the {tok.model_max_length} the model reads at once "
                      "(model_max_length)")
    ids = enc["input_ids"][0]
    row = {
        "tokens": tok.convert_ids_to_tokens(ids),
        "input_ids": ids,
        "token_type_ids": enc["token_type_ids"][0],
        "word_ids": enc["word_ids"][0],
        "offsets": [list(o) for o in enc["offsets"][0]],
    }
    if args.json:
        print(json.dumps(row, ensure_ascii=False))
        return 0
    print(f"{len(ids)} tokens")
    print(f"{'#':>4}  {'token':<20} {'id':>7} {'type':>4} {'word':>5}  chars")
    for i, (t, x, s, w, o) in enumerate(zip(row["tokens"], ids, row["token_type_ids"],
                                            row["word_ids"], row["offsets"])):
        print(f"{i:>4}  {t:<20} {x:>7} {s:>4} {'' if w is None or w < 0 else w:>5}  {o[0]}-{o[1]}")
    return 0


def stdin_text() -> str:
    """All of stdin as UTF-8 text but the one line end `echo` or a file's last line adds (byte-level
    BPE showed it as a token, `Ċ`, that the user never typed); bytes that are not UTF-8 are one
    line saying where."""
    raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"stdin is not UTF-8 (byte 0x{raw[err.start]:02x} at byte {err.start + 1}); convert it, "
                        "e.g. iconv -f latin1 -t utf-8") from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
