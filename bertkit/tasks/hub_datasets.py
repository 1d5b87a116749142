"""Hugging Face data set names as data (`--train imdb`, `--dev org/name:validation`,
`--data org/name:config:test`), read offline from the local `datasets` cache.

After `datasets.load_dataset(name)` has run once where there was network, the prepared Arrow
files lie in

    CACHE/NAMESPACE___NAME/CONFIG/VERSION/HASH/dataset_info.json   the splits and the features
    CACHE/NAMESPACE___NAME/CONFIG/VERSION/HASH/NAME-SPLIT.arrow    (or NAME-SPLIT-0000i-of-0000n.arrow)

(NAME in `datasets`' snake case, a name without a namespace as CACHE/NAME/...) with CACHE =
$HF_DATASETS_CACHE, else $HF_HOME/datasets, else $XDG_CACHE_HOME/huggingface/datasets, else
~/.cache/huggingface/datasets (`datasets`' order, read when a name is resolved). That directory
is where `load_dataset(name)` itself looks when the hub is unreachable or HF_HUB_OFFLINE=1 (its
`packaged_modules/cache` builder). bertkit opens that builder on the newest version of the
directory, so it reads the rows `load_dataset(name, config, split=split)` returns offline, and
it never uses the network (`pip install "bertkit[datasets]"`).

Syntax: NAME[:SPLIT] or NAME:CONFIG:SPLIT (CONFIG is needed when several are cached). Without a
split, --train reads "train", --dev "validation" (else "dev", "valid"), --data "test".
Precedence (builtin.resolve_source): a built-in data name (bbc, wordnet-...) first, then a file
or directory that exists, then this cache.
"""

from __future__ import annotations

import json
import os
import re

from bertkit.errors import DataError
from bertkit.models.hub_cache import is_repo_id

# The split each role reads when the name gives none, in order of preference.
DEFAULT_SPLITS = {"train": ("train",), "dev": ("validation", "dev", "valid"), "test": ("test",)}
_PART = re.compile(r"^[\w.-]+$")  # a config or split name

# datasets.naming.camelcase_to_snakecase (tested against it), so that no heavy import is needed
# to tell whether a name is cached.
_UPPER_UPPER = re.compile(r"([A-Z]+)([A-Z][a-z])")
_LOWER_UPPER = re.compile(r"([a-z\d])([A-Z])")


def datasets_cache_dir() -> str:
    """The directory `datasets` keeps prepared data sets in, read from the environment as it reads it."""
    home = os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", os.path.join("~", ".cache")), "huggingface"))
    return os.path.expandvars(os.path.expanduser(os.getenv("HF_DATASETS_CACHE", os.path.join(home, "datasets"))))


def snake_case(name: str) -> str:
    return _LOWER_UPPER.sub(r"\1_\2", _UPPER_UPPER.sub(r"\1_\2", name)).lower()


def parse_name(source: str) -> tuple[str, str | None, str | None] | None:
    """"org/name:cfg:test" -> ("org/name", "cfg", "test"); "imdb:train" -> ("imdb", None, "train");
    None when `source` cannot be a hub data set name."""
    parts = str(source).split(":")
    if not 1 <= len(parts) <= 3 or not is_repo_id(parts[0]) or not all(_PART.match(p) for p in parts[1:]):
        return None
    repo_id, rest = parts[0], parts[1:]
    return repo_id, (rest[0] if len(rest) == 2 else None), (rest[-1] if rest else None)


def dataset_root(repo_id: str) -> str:
    """CACHE/NAMESPACE___NAME for `repo_id` (the namespace kept as it is, the name snake-cased)."""
    *namespace, name = repo_id.split("/")
    return os.path.join(datasets_cache_dir(), "___".join(namespace + [snake_case(name)]))


def _prepared(directory: str) -> list[str]:
    """The CONFIG/VERSION/HASH directories under `directory` that hold a dataset_info.json."""
    found = []
    for config in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        for version in sorted(os.listdir(os.path.join(directory, config))):
            for digest in sorted(os.listdir(os.path.join(directory, config, version))):
                path = os.path.join(directory, config, version, digest)
                if os.path.isfile(os.path.join(path, "dataset_info.json")):
                    found.append(path)
    return found


def is_reference(source: str) -> bool:
    """`source` names a data set in the cache (and no local file or directory)."""
    source = str(source)
    parsed = None if os.path.exists(source) else parse_name(source)
    return parsed is not None and bool(_prepared(dataset_root(parsed[0])))


def resolve(source: str, role: str) -> str:
    """NAME[:SPLIT] / NAME:CONFIG:SPLIT as the explicit "NAME:CONFIG:SPLIT" of the cached copy
    (`role` train, dev or test picks the split when none is given); DataError saying where it
    looked and what to do when it is not there."""
    repo_id, config, split = parse_name(source) or (str(source), None, None)
    root = dataset_root(repo_id)
    prepared = _prepared(root)
    if not prepared:
        raise DataError(f"{source}: no such file or directory, not a built-in data name, and not a data set "
                        f"in the local Hugging Face datasets cache (looked for {root}); bertkit does not "
                        f"download: run datasets.load_dataset({repo_id!r}) where there is network (it fills "
                        "that cache), set HF_DATASETS_CACHE / HF_HOME to the cache that holds it, or pass a file")
    configs = sorted({_config_of(p) for p in prepared})
    if config is None and len(configs) > 1:
        raise DataError(f"{source}: the cache holds the configurations {', '.join(configs)} of {repo_id}; "
                        f"name one as {repo_id}:CONFIG:SPLIT")
    config = config or configs[0]
    if config not in configs:
        raise DataError(f"{source}: configuration {config!r} of {repo_id} is not in the cache ({root}); "
                        f"cached: {', '.join(configs)}")
    splits = _splits(_newest(root, config))
    if split is None:
        split = next((name for name in DEFAULT_SPLITS[role] if name in splits), DEFAULT_SPLITS[role][0])
    if split not in splits:
        raise DataError(f"{source}: {repo_id} ({config}) has no split {split!r} in the cache; its splits: "
                        f"{', '.join(splits)}; name one as {repo_id}:SPLIT")
    return f"{repo_id}:{config}:{split}"


def _config_of(prepared: str) -> str:
    return os.path.basename(os.path.dirname(os.path.dirname(prepared)))


def _newest(root: str, config: str) -> str:
    """The most recently written VERSION/HASH directory of `config`, as `datasets` picks it."""
    return max((p for p in _prepared(root) if _config_of(p) == config), key=os.path.getmtime)


def _splits(directory: str) -> list[str]:
    with open(os.path.join(directory, "dataset_info.json"), encoding="utf-8") as f:
        return list((json.load(f).get("splits") or {}))


def open_split(reference: str, role: str = "train"):
    """The `datasets.Dataset` of a cached data set name (made explicit by `resolve`), opened by
    `datasets`' own offline cache builder on the directory `resolve` found."""
    reference = resolve(reference, role)
    repo_id, config, split = parse_name(reference)
    directory = _newest(dataset_root(repo_id), config)
    try:
        from datasets.packaged_modules.cache.cache import Cache  # optional: the datasets extra
    except ImportError:
        raise DataError(f'{reference}: reading a Hugging Face data set needs the datasets package (>= 2.16): pip '
                        'install datasets (or "bertkit[datasets]")') from None
    version, digest = directory.split(os.sep)[-2:]
    builder = Cache(cache_dir=datasets_cache_dir(), repo_id=repo_id, dataset_name=repo_id.split("/")[-1],
                    config_name=config, version=version, hash=digest)
    try:
        return builder.as_dataset(split=split)
    except (OSError, ValueError, KeyError) as e:
        raise DataError(f"{reference}: the cached copy in {directory} is not readable "
                        f"({type(e).__name__}: {str(e)[:200]})") from None
