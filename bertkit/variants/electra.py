"""Moved to bertkit/objectives/electra.py; this re-export keeps bertkit/__init__.py working until its
import is updated (then remove this file)."""

from ..objectives.electra import ElectraForPreTraining, ElectraPretrainer, generator_config  # noqa: F401
