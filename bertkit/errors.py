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


class WriteError(BertkitError, OSError):
    """A file or directory could not be written (no space, no permission, a read-only file
    system): the message names the path, what happened and what to do. Still an OSError (with
    its errno and filename) for code that catches those."""

    def __init__(self, message: str, errno: int | None = None, filename: str | None = None,
                 strerror: str | None = None):
        super().__init__(message)
        self.errno, self.filename, self.strerror = errno, filename, strerror

    def __str__(self) -> str:  # OSError's would be "[Errno N] ..." once errno is set
        return str(self.args[0])


class RunInterrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM) stopped a run after it saved what it had; the message says
    where and how to continue. The command exits with 128 + the signal's number (130, 143), as a
    shell reports a process ended by that signal. A KeyboardInterrupt, so nothing that catches
    Exception swallows it."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + int(signum)
