from __future__ import annotations

from tidemill.tools import parse_docstring


def test_summary_and_args_with_types_and_continuations() -> None:
    doc = parse_docstring(
        """Find flights.

        Searches every airline we know.

        Args:
            origin (str): IATA code
                of the departure airport.
            when: ISO date.
            **extra: Ignored.

        Returns:
            A list of flights.
        """
    )
    assert doc.description == "Find flights.\n\nSearches every airline we know."
    assert doc.params == {
        "origin": "IATA code of the departure airport.",
        "when": "ISO date.",
        "extra": "Ignored.",
    }


def test_no_docstring() -> None:
    assert parse_docstring(None).description == ""
    assert parse_docstring("").params == {}


def test_sections_other_than_args_are_not_descriptions() -> None:
    doc = parse_docstring("Do it.\n\nRaises:\n    ValueError: never\n")
    assert doc.description == "Do it."
    assert doc.params == {}
