"""The Enron email corpus: readers and the paper's two count matrices.

One module a step, each re-exported here:

- :mod:`~lpviz.datasets.enron.parser`: one raw RFC 822 message to an :class:`Email`;
- :mod:`~lpviz.datasets.enron.readers`: :func:`read_emails` over a maildir, the
  CMU tarball or ``emails.csv``, with a :class:`ReadReport`;
- :mod:`~lpviz.datasets.enron.tokens`: :func:`clean_body`, :func:`tokenize` and
  the vocabulary rules (:data:`STOP_WORDS`, :data:`TOKENIZATION`);
- :mod:`~lpviz.datasets.enron.corpus`: the parsed :class:`EnronCorpus`, read
  once per source and cached (:func:`read_corpus`);
- :mod:`~lpviz.datasets.enron.builders`: the paper's topic and network matrices
  (:func:`build_enron_topics`, :func:`build_enron_network`);
- :mod:`~lpviz.datasets.enron.tensor`: sender x recipient x month counts (:func:`enron_tensor`).
"""

from .builders import build_enron_network, build_enron_topics
from .corpus import EnronCorpus, read_corpus
from .parser import Email, MalformedEmail, parse_email
from .readers import ReadReport, read_emails
from .tensor import enron_tensor
from .tokens import STOP_WORDS, TOKENIZATION, clean_body, tokenize

__all__ = [
    "Email",
    "EnronCorpus",
    "MalformedEmail",
    "ReadReport",
    "STOP_WORDS",
    "TOKENIZATION",
    "build_enron_network",
    "build_enron_topics",
    "enron_tensor",
    "parse_email",
    "read_corpus",
    "read_emails",
    "clean_body",
    "tokenize",
]
