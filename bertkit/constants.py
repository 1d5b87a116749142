"""Facts several components share, each stated once."""

IGNORE_INDEX = -100  # the label that carries no loss: torch's cross-entropy skips it by default
