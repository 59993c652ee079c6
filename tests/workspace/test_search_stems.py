"""Search matches other forms of a word by its stem (`shipping` finds a shipment)."""

from __future__ import annotations

from tidemill.workspace._search import SCORE_CUTOFF, SearchEntry, SearchIndex, stem

ENTRIES = [
    SearchEntry("f/shop/create_shipment", "script", "Create a shipment and buy a label"),
    SearchEntry("f/notify/send_notification", "script", "Send a notification to a channel"),
    SearchEntry("f/hr/onboard_employee", "flow", "Onboard a new hire"),
    SearchEntry("f/sales/score_lead", "script", "Score a lead"),
    SearchEntry("f/shop/stock_count", "script", "Count stock per warehouse"),
]


def test_another_form_of_a_word_matches_by_its_stem() -> None:
    index = SearchIndex(ENTRIES)
    assert [h.path for h in index.search("shipping label")] == ["f/shop/create_shipment"]
    assert index.search("notify")[0].path == "f/notify/send_notification"
    assert index.search("lead scoring")[0].path == "f/sales/score_lead"
    assert index.search("onboarding")[0].path == "f/hr/onboard_employee"
    assert index.search("onbaording")[0].path == "f/hr/onboard_employee"  # and a typo in it


def test_a_stem_match_ranks_below_the_word_itself() -> None:
    index = SearchIndex([*ENTRIES, SearchEntry("f/ops/shipping", "script", "Shipping rules")])
    hits = index.search("shipping")
    assert [h.path for h in hits] == ["f/ops/shipping", "f/shop/create_shipment"]
    assert hits[0].score == 100.0
    assert SCORE_CUTOFF <= hits[1].score < hits[0].score


def test_unlike_stems_do_not_match() -> None:
    index = SearchIndex(ENTRIES)
    assert index.search("notes") == []  # `not` is no stem of `notify`
    assert index.search("stocking count")[0].path == "f/shop/stock_count"
    assert index.search("kubernetes") == []
    assert [stem(w) for w in ("user", "bus", "v2025", "processing", "process")] == [
        "user",
        "bus",
        "v2025",
        "proces",
        "proces",
    ]
