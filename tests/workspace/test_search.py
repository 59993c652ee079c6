"""The in-memory fuzzy search over workspace items."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemill.workspace._search import (
    MAX_QUERY_CHARS,
    SCORE_CUTOFF,
    SearchEntry,
    SearchHit,
    SearchIndex,
)

ENTRIES = [
    SearchEntry("f/support/agents/triage", "flow", "Triage incoming support tickets"),
    SearchEntry("f/support/agents/triage_bot", "script", "Answer the easy tickets"),
    SearchEntry("f/billing/order_refund", "script", "Refund an order", "Calls Stripe."),
    SearchEntry("f/billing/invoices", "flow", "Monthly invoices", "Sends each customer a PDF."),
    SearchEntry("f/billing/stripe", "resource", "Stripe account", "The live key."),
    SearchEntry("u/alice/notes", "variable", "Scratch", "Ideas about triage and escalation."),
    SearchEntry("u/bob/postgres", "resource_type", "PostgreSQL connection"),
    SearchEntry("u/carol/report", "script", "日本語 レポート", "Ünïcode déjà vu"),
]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(ENTRIES)


def paths(hits: list[SearchHit]) -> list[str]:
    return [hit.path for hit in hits]


def test_len_counts_entries(index: SearchIndex) -> None:
    assert len(index) == len(ENTRIES)
    assert len(SearchIndex([])) == 0


def test_exact_name_match_scores_100_and_ranks_first(index: SearchIndex) -> None:
    hits = index.search("triage")
    assert hits[0] == SearchHit(
        "f/support/agents/triage", "flow", "Triage incoming support tickets", 100.0
    )
    # The same word in a longer name ties on score; the shorter name wins the tie.
    assert hits[1].path == "f/support/agents/triage_bot"
    assert hits[1].score == 100.0


def test_typo_is_tolerated(index: SearchIndex) -> None:
    hits = index.search("tirage")
    assert hits[0].path == "f/support/agents/triage"
    assert SCORE_CUTOFF <= hits[0].score < 100.0
    assert "u/alice/notes" in paths(hits)


def test_typo_in_a_multi_word_query(index: SearchIndex) -> None:
    assert index.search("refnud ordr")[0].path == "f/billing/order_refund"


def test_prefix_matches(index: SearchIndex) -> None:
    assert index.search("invo")[0].path == "f/billing/invoices"
    assert index.search("postg")[0].path == "u/bob/postgres"


def test_word_order_does_not_matter(index: SearchIndex) -> None:
    forward = index.search("order refund")
    backward = index.search("refund order")
    assert forward[0].path == backward[0].path == "f/billing/order_refund"
    assert forward[0].score == backward[0].score == 100.0


def test_path_words_match(index: SearchIndex) -> None:
    # "f/billing/..." : the folder is a word, and the query may be a path.
    assert set(paths(index.search("billing"))) >= {
        "f/billing/order_refund",
        "f/billing/invoices",
        "f/billing/stripe",
    }
    assert index.search("f/billing/order_refund")[0].path == "f/billing/order_refund"


def test_name_match_ranks_above_description_only_match(index: SearchIndex) -> None:
    hits = index.search("triage")
    ranked = paths(hits)
    assert ranked.index("f/support/agents/triage") < ranked.index("u/alice/notes")
    by_path = {hit.path: hit.score for hit in hits}
    assert by_path["f/support/agents/triage"] > by_path["u/alice/notes"]


def test_summary_match_ranks_above_description_only_match() -> None:
    index = SearchIndex(
        [
            SearchEntry("f/a/one", "script", description="Sends the weekly digest."),
            SearchEntry("f/a/two", "script", "Weekly digest"),
            SearchEntry("f/a/digest", "script"),
        ]
    )
    hits = index.search("digest")
    assert paths(hits) == ["f/a/digest", "f/a/two", "f/a/one"]
    assert hits[0].score > hits[1].score > hits[2].score
    # A typo: the summary still outranks the description.
    assert paths(index.search("weekyl"))[:2] == ["f/a/two", "f/a/one"]


def test_fuzzy_name_match_ranks_above_fuzzy_description_match(index: SearchIndex) -> None:
    ranked = paths(index.search("tirage"))
    assert ranked.index("f/support/agents/triage") < ranked.index("u/alice/notes")


def test_scores_are_descending_and_in_range(index: SearchIndex) -> None:
    for query in ("triage", "tirage", "billing", "refund order", "the"):
        scores = [hit.score for hit in index.search(query)]
        assert scores == sorted(scores, reverse=True)
        assert all(SCORE_CUTOFF <= score <= 100.0 for score in scores)


def test_no_match_returns_empty(index: SearchIndex) -> None:
    assert index.search("kubernetes") == []
    assert index.search("zzqx") == []
    # Two words must both match: one good word is not enough.
    assert index.search("triage kubernetes") == []


def test_query_without_letters_or_digits_matches_nothing(index: SearchIndex) -> None:
    assert index.search(".*[(") == []
    assert index.search("/") == []


@pytest.mark.parametrize("query", ["", " ", "\t\n  "])
def test_empty_query_lists_entries_in_path_order(index: SearchIndex, query: str) -> None:
    hits = index.search(query)
    assert paths(hits) == sorted(entry.path for entry in ENTRIES)
    assert all(hit.score == 0.0 for hit in hits)
    assert paths(index.search(query, limit=3)) == sorted(entry.path for entry in ENTRIES)[:3]


def test_empty_query_honours_kinds_and_allowed(index: SearchIndex) -> None:
    hits = index.search("", kinds={"script"}, allowed=lambda path: not path.startswith("u/"))
    assert paths(hits) == ["f/billing/order_refund", "f/support/agents/triage_bot"]


def test_kinds_filter(index: SearchIndex) -> None:
    assert paths(index.search("triage", kinds={"variable"})) == ["u/alice/notes"]
    assert paths(index.search("triage", kinds=["flow", "script"])) == [
        "f/support/agents/triage",
        "f/support/agents/triage_bot",
    ]
    assert index.search("triage", kinds=set()) == []
    assert index.search("triage", kinds={"no-such-kind"}) == []


def test_kinds_given_as_one_string_is_refused(index: SearchIndex) -> None:
    with pytest.raises(TypeError, match="collection of kinds"):
        index.search("triage", kinds="flow")


def test_allowed_filters_before_the_limit() -> None:
    entries = [
        SearchEntry(f"f/ops/deploy_{n:02d}", "script", f"Deploy service {n}") for n in range(30)
    ]
    entries.append(SearchEntry("f/ops/unrelated", "script", "Something else"))
    index = SearchIndex(entries)
    assert len(index.search("deploy", limit=100)) == 30

    def odd(path: str) -> bool:
        return int(path.rsplit("_", 1)[-1]) % 2 == 1

    hits = index.search("deploy", limit=10, allowed=odd)
    assert len(hits) == 10
    assert all(odd(hit.path) for hit in hits)
    assert len(index.search("deploy", limit=100, allowed=odd)) == 15


def test_allowed_never_leaks_and_is_called_lazily(index: SearchIndex) -> None:
    asked: list[str] = []

    def not_alice(path: str) -> bool:
        asked.append(path)
        return not path.startswith("u/alice/")

    hits = index.search("triage", allowed=not_alice)
    assert "u/alice/notes" not in paths(hits)
    assert "u/alice/notes" in asked

    asked.clear()
    assert len(index.search("triage", limit=1, allowed=not_alice)) == 1
    assert asked == ["f/support/agents/triage"]


def test_same_path_different_kinds() -> None:
    index = SearchIndex(
        [
            SearchEntry("f/ops/sync", "script", "Sync the data"),
            SearchEntry("f/ops/sync", "flow", "Sync the data"),
        ]
    )
    assert sorted(hit.kind for hit in index.search("sync")) == ["flow", "script"]
    assert [hit.kind for hit in index.search("sync", kinds={"flow"})] == ["flow"]


def test_unicode(index: SearchIndex) -> None:
    assert index.search("日本語")[0].path == "u/carol/report"
    assert index.search("ÜNÏCODE")[0].path == "u/carol/report"
    assert index.search("🦀 ∑ \u0000 \ufeff") == []


@pytest.mark.parametrize(
    "query",
    [
        "x" * 10_000,
        "triage " * 2_000,
        ".*[(",
        "(?P<x>a)+$^|\\",
        "%s %d {0} {{}}",
        "\u0000\u200b\u202e",
        "a b c d e f g h i j k l m n o p",
        "Ω" * 10_000,
    ],
)
def test_hostile_queries_do_not_crash(index: SearchIndex, query: str) -> None:
    hits = index.search(query)
    assert isinstance(hits, list)
    assert all(isinstance(hit, SearchHit) for hit in hits)


def test_long_query_is_cut(index: SearchIndex) -> None:
    # Only the first MAX_QUERY_CHARS characters count.
    query = "triage " + "x" * (MAX_QUERY_CHARS * 4)
    assert index.search(query) == index.search("triage " + "x" * (MAX_QUERY_CHARS - 7))


def test_hostile_entries_do_not_crash() -> None:
    index = SearchIndex(
        [
            SearchEntry("", "script"),
            SearchEntry("///", "flow", ".*[(", "\u0000"),
            SearchEntry("f/x/" + "a" * 5_000, "script", "b" * 5_000, "c " * 5_000),
            SearchEntry("f/x/ok", "script", "Fine"),
        ]
    )
    assert paths(index.search("ok")) == ["f/x/ok"]
    assert paths(index.search("aaaa")) == ["f/x/" + "a" * 5_000]  # a prefix of the name
    assert len(index.search("", limit=10)) == 4


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_non_positive_limit_is_refused(index: SearchIndex, limit: int) -> None:
    with pytest.raises(ValueError, match=rf"limit must be a positive integer, got {limit}"):
        index.search("triage", limit=limit)
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        index.search("", limit=limit)


@pytest.mark.parametrize("limit", [True, 2.5, "3"])
def test_non_integer_limit_is_refused(index: SearchIndex, limit: object) -> None:
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        index.search("triage", limit=limit)  # type: ignore[arg-type]


def test_non_string_query_is_refused(index: SearchIndex) -> None:
    with pytest.raises(TypeError, match="query must be a string"):
        index.search(None)  # type: ignore[arg-type]


def test_limit_caps_results(index: SearchIndex) -> None:
    assert len(index.search("billing", limit=2)) == 2
    assert len(index.search("billing", limit=1)) == 1


def test_searching_an_empty_index() -> None:
    index = SearchIndex([])
    assert index.search("triage") == []
    assert index.search("") == []


_text = st.text(max_size=40)


@settings(max_examples=75, deadline=None)
@given(
    entries=st.lists(
        st.builds(
            SearchEntry,
            path=_text,
            kind=st.sampled_from(["script", "flow", "resource", "variable", "resource_type"]),
            summary=_text,
            description=_text,
        ),
        max_size=20,
    ),
    query=_text,
    limit=st.integers(min_value=1, max_value=25),
    kinds=st.none() | st.sets(st.sampled_from(["script", "flow", "variable"])),
)
def test_any_input_gives_sane_hits(
    entries: list[SearchEntry], query: str, limit: int, kinds: set[str] | None
) -> None:
    index = SearchIndex(entries)

    def allowed(path: str) -> bool:
        return len(path) % 2 == 0

    hits = index.search(query, kinds=kinds, limit=limit, allowed=allowed)
    assert len(hits) <= limit
    assert all(allowed(hit.path) for hit in hits)
    assert kinds is None or all(hit.kind in kinds for hit in hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    if query.strip():
        assert all(SCORE_CUTOFF <= score <= 100.0 for score in scores)
    else:
        assert all(score == 0.0 for score in scores)
