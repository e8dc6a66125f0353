"""The Enron email corpus: readers and the paper's two count matrices."""

from .parser import (
    STOP_WORDS,
    TOKENIZATION,
    Email,
    EnronCorpus,
    MalformedEmail,
    ReadReport,
    build_enron_network,
    build_enron_topics,
    clean_body,
    parse_email,
    read_corpus,
    read_emails,
    tokenize,
)

__all__ = [
    "Email",
    "EnronCorpus",
    "MalformedEmail",
    "ReadReport",
    "STOP_WORDS",
    "TOKENIZATION",
    "build_enron_network",
    "build_enron_topics",
    "parse_email",
    "read_corpus",
    "read_emails",
    "clean_body",
    "tokenize",
]
