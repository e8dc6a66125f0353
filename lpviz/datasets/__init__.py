"""Data sets: synthetic generators with known truth, Enron readers, loaders for your own files, cache."""

from ._types import CountData, SyntheticData

__all__ = ["CountData", "SyntheticData"]
from .synthetic import make_topics, make_blocks
__all__ += ["make_topics", "make_blocks"]
from .loaders import load_counts, load_data, save_counts
__all__ += ["load_counts", "load_data", "save_counts"]
from .enron import EnronCorpus, ReadReport, build_enron_network, build_enron_topics, read_corpus, read_emails
__all__ += ["EnronCorpus", "ReadReport", "build_enron_network", "build_enron_topics", "read_corpus", "read_emails"]
from .download import fetch_enron
__all__ += ["fetch_enron"]
from .holdout import HOLDOUTS, holdout_mask
__all__ += ["HOLDOUTS", "holdout_mask"]
