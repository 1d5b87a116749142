import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # for `helpers`


@pytest.fixture(scope="session")
def bbc_tok_examples(bbc_dir, tmp_path_factory):
    """A 1,500-token WordPiece vocabulary trained on 60 BBC articles, and their examples."""
    from helpers import bbc_examples, bbc_files

    from bertkit.tokenizer import Tokenizer

    files = bbc_files(bbc_dir, 60)
    tok = Tokenizer.train_wordpiece(files, vocab_size=1500, show_progress=False)
    directory = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(directory)
    return tok, str(directory), bbc_examples(tok, files)

