"""Exceptions for mistakes a user can make.

Every error a user can cause (a bad file, a wrong shape, an unknown option) is raised as a
`BertkitError` whose message says what is wrong and what to do about it, so the CLI can print
one line instead of a traceback from deep inside torch.
"""


class BertkitError(Exception):
    """Base class: a problem with the user's input, config or files."""


class ConfigError(BertkitError, ValueError):
    """A configuration value is invalid or inconsistent."""


class CheckpointError(BertkitError):
    """A checkpoint directory or weights file is missing, corrupt or does not fit the model."""


class DataError(BertkitError, ValueError):
    """An input data file or text is malformed."""


class EncodingError(DataError):
    """A text file is not UTF-8 (a corpus of many files may skip it; everything else refuses it)."""
