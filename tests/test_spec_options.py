"""Options in a generator's data spec (``synthetic-topics-blockwise:n_docs=3000,n_words=60``)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lpviz.datasets import BlockwiseTopics, SyntheticData, load_data
from lpviz.datasets.loaders import format_spec_options, parse_spec_options

_values = st.one_of(st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False), st.booleans())
_options = st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True), _values, max_size=8)


@given(_options)
def test_spec_options_round_trip_with_their_types(options):
    parsed = parse_spec_options(format_spec_options(options)) if options else {}
    assert parsed == options
    assert [type(v) for v in parsed.values()] == [type(v) for v in options.values()]


def test_spec_values_written_by_hand():
    assert parse_spec_options(" n_docs = 200_000 ,alpha0=5e-1,exact=TRUE,x=-3") == {
        "n_docs": 200000, "alpha0": 0.5, "exact": True, "x": -3,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("n_docs", "'n_docs' is not a key=value option; write e.g. n_docs=200000"),
        ("n_docs=", "is not a key=value option"),
        ("=3", "is not a key=value option"),
        ("n_docs=1,,n_words=2", "'' is not a key=value option"),
        ("n docs=3", "is not a key=value option"),
        ("n_docs=many", "n_docs=many: the value is not a number or true/false; write e.g. n_docs=1000"),
        ("alpha0=nan", "alpha0=nan: the value is not a number"),
        ("alpha0=inf", "alpha0=inf: the value is not a number"),
        ("n_docs=1,n_docs=2", "n_docs is given twice; give each option once"),
    ],
)
def test_malformed_options_are_one_clear_error(text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse_spec_options(text)
    with pytest.raises(ValueError, match="data spec 'synthetic-topics:.*takes no path; its options: n_docs, n_words"):
        load_data(f"synthetic-topics:{text}")


def test_specs_set_the_generators_sizes():
    gen = load_data("synthetic-topics-blockwise:n_docs=3000,n_words=60,n_topics=3,alpha0=0.5", random_state=4)
    assert isinstance(gen, BlockwiseTopics)
    assert (gen.shape, gen.n_topics, gen.alpha0, gen.seed) == ((3000, 60), 3, 0.5, 4)
    topics = load_data("synthetic-topics:n_docs=12,n_words=7,n_topics=2,random_state=3")
    assert isinstance(topics, SyntheticData) and topics.shape == (12, 7)
    assert (topics.Y == load_data("synthetic-topics", n_docs=12, n_words=7, n_topics=2, random_state=3).Y).all()
    blocks = load_data("synthetic-blocks:n_actors=8,n_communities=2", random_state=1)
    assert blocks.shape == (8, 8)


def test_unknown_or_repeated_keys_name_the_fix():
    with pytest.raises(ValueError, match="synthetic-topics-blockwise has no option n_doc; it takes n_docs, n_words"):
        load_data("synthetic-topics-blockwise:n_doc=5")
    with pytest.raises(ValueError, match="random_state also given as a keyword option.*give each once"):
        load_data("synthetic-topics:random_state=2", random_state=3)
    with pytest.raises(ValueError, match="needs a path"):  # the path specs are unchanged
        load_data("enron-topics:")
