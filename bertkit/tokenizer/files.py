"""A tokenizer's files: reading a Hugging Face tokenizer directory (tokenizer.json, or vocab.txt,
or vocab.json + merges.txt, with tokenizer_config.json) and what saving writes."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as _RustTokenizer

from bertkit.errors import CheckpointError, DataError
from bertkit.io import iter_text_lines, read_json_object
from bertkit.runtime.run_dir import not_a_model
from bertkit.models.hub_cache import resolve_model_dir
from bertkit.tokenizer.kinds import (REQUIRED_ROLES, ROLES, SPECIALS, add_bpe_specials, bert_post_processor,
                                     roberta_post_processor)

# HF writes int(1e30) for "no limit"; anything this large is not a real position limit.
_ABSURD_MAX_LENGTH = 1_000_000
_EXPECTED_FILES = "tokenizer.json, or vocab.txt (WordPiece), or vocab.json + merges.txt (BPE)"


def read_tokenizer(directory) -> tuple[_RustTokenizer, str, dict[str, str], int | None]:
    """(backend, kind, special tokens, model_max_length) of a Hugging Face tokenizer directory,
    or of one tokenizer file.

    Looks for tokenizer.json first, else vocab.txt (WordPiece, lowercasing per
    `do_lower_case` in tokenizer_config.json, default True), else vocab.json +
    merges.txt (byte-level BPE). tokenizer_config.json next to the file(s), when
    present, supplies special token names and `model_max_length`.
    """
    path = Path(resolve_model_dir(directory))  # a path, or ORG/NAME in the local HF cache
    if not path.exists():
        raise CheckpointError(f"tokenizer path {path} does not exist; expected a directory with {_EXPECTED_FILES}")
    folder = path if path.is_dir() else path.parent
    config = _read_json_config(folder / "tokenizer_config.json")
    config.update({k: v for k, v in _read_json_config(folder / "special_tokens_map.json").items() if k not in config})
    specials = {r: _token_content(config[f"{r}_token"]) for r in ROLES if config.get(f"{r}_token")}

    if path.is_dir():
        file = next((path / n for n in ("tokenizer.json", "vocab.txt", "vocab.json") if (path / n).is_file()), None)
        if file is None:
            raise CheckpointError(f"no tokenizer files in {path}; expected {_EXPECTED_FILES}"
                                  f"{not_a_model(path) or _saved_without_one(path)}")
    else:
        file = path

    if file.name.endswith(".txt"):
        backend = _wordpiece_from_vocab(file, config, {**SPECIALS["wordpiece"], **specials})
        kind = "wordpiece"
    else:
        data = _read_json_file(file)
        if "model" in data:  # a full tokenizer.json
            backend, kind = _from_tokenizer_json(file, data, config, specials)
        else:  # a BPE vocab.json; merges.txt must sit beside it
            backend = _bpe_from_vocab(file, config, {**SPECIALS["bpe"], **specials})
            kind = "bpe"
    return backend, kind, specials, config.get("model_max_length")

def _saved_without_one(path: Path) -> str:
    """The fix for a model directory saved without its tokenizer (`save_pretrained(DIR)` in Python)."""
    if not (path / "config.json").is_file():
        return ""
    return ("; a model saved without its tokenizer: save it with save_pretrained(DIR, tokenizer=tok), or copy "
            "the tokenizer files of the model it came from into it")

# ------------------------------------------------------------------ encoding


def tokenizer_files(backend: _RustTokenizer, kind: str, special_map: dict[str, str],
                    model_max_length: int | None) -> dict[str, str]:
    """{file name: text} of a saved tokenizer, as transformers writes and reads them; `special_map`
    {role_token: token} names the special tokens in the vocabulary."""
    data = json.loads(backend.to_str())
    files = {"tokenizer.json": backend.to_str(pretty=True)}
    config = {**special_map, "tokenizer_class": "BertTokenizer" if kind == "wordpiece" else "RobertaTokenizer"}
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    vocab = data["model"]["vocab"]
    if kind == "wordpiece":
        lowercase, strip_accents = _wordpiece_normalization(data.get("normalizer"))
        config.update(do_lower_case=lowercase, strip_accents=strip_accents, tokenize_chinese_chars=True)
        files["vocab.txt"] = "".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]))
    else:
        # RoBERTa also names <s>/</s> as bos/eos; transformers reads them from here.
        config.update(bos_token=special_map["cls_token"], eos_token=special_map["sep_token"])
        config.update(add_prefix_space=_byte_level_prefix_space(data.get("pre_tokenizer")), trim_offsets=True)
        files["vocab.json"] = json.dumps(vocab, ensure_ascii=False)
        merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        files["merges.txt"] = "#version: 0.2\n" + "".join(m + "\n" for m in merges)
    files["tokenizer_config.json"] = json.dumps(config, indent=2, ensure_ascii=False)
    files["special_tokens_map.json"] = json.dumps(special_map, indent=2, ensure_ascii=False)
    return files


def _wordpiece_from_vocab(file: Path, config: dict, specials: dict[str, str]) -> _RustTokenizer:
    """Build BERT's pipeline around a vocab.txt, as transformers does for slow checkpoints."""
    try:  # checked: a regular file, UTF-8 (the line of a bad byte named)
        lines = list(iter_text_lines(file))
    except DataError as err:
        raise CheckpointError(f"{err}; restore the tokenizer files") from None
    # One token per line, id = line number; a repeated token keeps its last id (as HF does).
    vocab = {line: i for i, (_, line) in enumerate(lines)}
    if not vocab:
        raise CheckpointError(f"{file} is empty; a WordPiece vocab.txt needs one token per line")
    lowercase = bool(config.get("do_lower_case", True))
    backend = _RustTokenizer(models.WordPiece(vocab=vocab, unk_token=specials["unk"], max_input_chars_per_word=100))
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
        strip_accents=config.get("strip_accents"),
        lowercase=lowercase,
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    present = [specials[r] for r in ROLES if specials[r] in vocab]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in present])
    if specials["cls"] in vocab and specials["sep"] in vocab:
        backend.post_processor = bert_post_processor(backend, specials)
    return backend


def _bpe_from_vocab(file: Path, config: dict, specials: dict[str, str]) -> _RustTokenizer:
    """Build RoBERTa's byte-level pipeline around vocab.json + merges.txt."""
    merges = file.parent / "merges.txt"
    if not merges.is_file():
        raise CheckpointError(f"{merges} is missing; a BPE vocab.json needs merges.txt beside it")
    try:
        model = models.BPE.from_file(str(file), str(merges))
    except Exception as err:
        raise CheckpointError(f"cannot read BPE files {file} / {merges}: {err}; re-save the tokenizer") from err
    add_prefix_space = bool(config.get("add_prefix_space", False))
    backend = _RustTokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    backend.decoder = decoders.ByteLevel()
    vocab = backend.get_vocab()
    if all(specials[r] in vocab for r in REQUIRED_ROLES):
        add_bpe_specials(backend, specials)
        backend.post_processor = roberta_post_processor(backend, specials, add_prefix_space)
    return backend


def _from_tokenizer_json(file: Path, data: dict, config: dict, specials: dict[str, str]):
    """Load a full tokenizer.json; returns (backend, kind)."""
    kinds = {"WordPiece": "wordpiece", "BPE": "bpe"}
    if not isinstance(data["model"], dict):
        raise CheckpointError(f"{file}: \"model\" must be a JSON object with a \"type\"; restore the tokenizer files, "
                              "or save the tokenizer again")
    model_type = data["model"].get("type")
    if model_type not in kinds:
        raise CheckpointError(
            f"{file} holds a {model_type} model; bertkit supports WordPiece and BPE tokenizers only"
        )
    kind = kinds[model_type]
    try:
        backend = _RustTokenizer.from_str(json.dumps(data))
    except Exception as err:
        raise CheckpointError(f"cannot load {file}: {err}; re-save it with a recent `tokenizers`") from err
    if backend.post_processor is None:  # some exports omit it; without it no [CLS]/[SEP] get added
        names = {**SPECIALS[kind], **specials}
        if kind == "wordpiece":
            backend.post_processor = bert_post_processor(backend, names)
        else:
            prefix = _byte_level_prefix_space(data.get("pre_tokenizer"))
            backend.post_processor = roberta_post_processor(backend, names, prefix)
    return backend, kind


def _read_json_file(path: Path) -> dict:
    return read_json_object(path, "restore the tokenizer files, or save the tokenizer again", CheckpointError)


def _read_json_config(path: Path) -> dict:
    """A side config file (tokenizer_config.json etc.) or {} if absent."""
    return _read_json_file(path) if path.is_file() else {}


def _token_content(value) -> str:
    """Special tokens appear as plain strings or as AddedToken dicts {"content": ...}."""
    return value["content"] if isinstance(value, dict) else str(value)


def sane_max_length(value) -> int | None:
    if value is None:
        return None
    try:
        value = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if 0 < value < _ABSURD_MAX_LENGTH else None


def _wordpiece_normalization(normalizer: dict | None) -> tuple[bool, bool | None]:
    """(lowercase, strip_accents) implied by a tokenizer.json normalizer, for tokenizer_config.json."""
    if not normalizer:
        return False, None
    parts = normalizer.get("normalizers", [normalizer])
    bert = next((p for p in parts if p.get("type") == "BertNormalizer"), None)
    if bert is not None:  # alone, or after NFC (a cased vocabulary bertkit trained)
        return bool(bert.get("lowercase")), bert.get("strip_accents")
    types = {p.get("type") for p in parts}
    return "Lowercase" in types, (True if "StripAccents" in types else None)


def _byte_level_prefix_space(pre_tokenizer: dict | None) -> bool:
    if not pre_tokenizer:
        return False
    parts = pre_tokenizer.get("pretokenizers", [pre_tokenizer])
    return any(p.get("type") == "ByteLevel" and p.get("add_prefix_space") for p in parts)
