"""Data for pre-training: corpora -> token shards -> examples -> masked batches.

    docs = open_corpus("bbc")                                  # documents as sentence lists
    prepare_shards(docs, tokenizer, "shards/bbc")              # memory-mapped token shards
    corpus = ShardedCorpus("shards/bbc", expected_vocab=tokenizer)
    builder = make_builder("nsp", 128, SpecialTokens.from_tokenizer(tokenizer))
    dataset = PretrainingDataset(corpus, builder, seed=0)
    collate = MLMCollator(tokenizer, strategy="whole_word", seed=0)
"""

from bertkit.data.collate import STRATEGIES, MLMCollator, pad_examples
from bertkit.data.corpus import Corpus, open_corpus, split_sentences
from bertkit.data.documents import CorpusDocuments, first, shard_documents, split_documents
from bertkit.data.examples import (
    DocSentencesBuilder,
    FullSentencesBuilder,
    NSPBuilder,
    PretrainingDataset,
    SOPBuilder,
    SpecialTokens,
    make_builder,
    truncate_seq_pair,
)
from bertkit.data.keywords import read_keywords
from bertkit.data.masking import VocabInfo
from bertkit.data.shards import ShardedCorpus, prepare_shards, vocab_fingerprint

__all__ = [
    "Corpus", "open_corpus", "split_sentences",
    "prepare_shards", "ShardedCorpus", "vocab_fingerprint",
    "CorpusDocuments", "first", "shard_documents", "split_documents",
    "SpecialTokens", "NSPBuilder", "SOPBuilder", "FullSentencesBuilder", "DocSentencesBuilder",
    "make_builder", "truncate_seq_pair", "PretrainingDataset",
    "MLMCollator", "pad_examples", "VocabInfo", "STRATEGIES", "read_keywords",
]
