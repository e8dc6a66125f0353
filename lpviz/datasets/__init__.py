"""Data sets: synthetic generators with known truth, Enron readers, loaders for your own files, cache."""

from ._types import CountData, SyntheticData
from .blockwise import GENERATOR_ROWS, BlockwiseRelease, BlockwiseTopics, blockwise_release, make_topics_blockwise
from .download import fetch_enron
from .enron import (
    EnronCorpus,
    ReadReport,
    build_enron_network,
    build_enron_topics,
    enron_tensor,
    read_corpus,
    read_emails,
)
from .holdout import HOLDOUTS, holdout_mask
from .loaders import load_counts, load_data, save_counts
from .synthetic import make_blocks, make_tensor, make_topics

__all__ = [
    "CountData",
    "SyntheticData",
    "make_topics",
    "make_blocks",
    "make_tensor",
    "make_topics_blockwise",
    "BlockwiseTopics",
    "GENERATOR_ROWS",
    "BlockwiseRelease",
    "blockwise_release",
    "load_counts",
    "load_data",
    "save_counts",
    "EnronCorpus",
    "ReadReport",
    "build_enron_network",
    "build_enron_topics",
    "enron_tensor",
    "read_corpus",
    "read_emails",
    "fetch_enron",
    "HOLDOUTS",
    "holdout_mask",
]
