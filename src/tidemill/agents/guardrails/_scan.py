"""The scan: which detector matches where, decided left to right.

One procedure serves whole texts and streams, so a streamed answer is
redacted exactly as the whole answer would be. From a position, each
detector proposes its first valid match; the leftmost wins, then the
longest, then the detector listed first. The scan resumes where the winner
ends.

On a stream only part of the text is known. A detector's proposal is
*settled* when the text that follows cannot change it: it starts before the
detector's *horizon*, the first position from which the known text could
still be the beginning of one of its matches (`Detector.partial`), or that
is within `max_length` of the end. A winner is chosen only when it is
settled and starts before every unsettled detector's horizon; otherwise the
scan stops there and waits for more text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tidemill.agents.guardrails._detectors import Detector

__all__ = ["Decision", "Found", "horizons", "next_decision", "redact", "required_gate", "scan"]

# Characters past a match that a lookahead may read (the built-ins read at most two).
_LOOKAHEAD = 4


@dataclass(frozen=True, slots=True)
class Found:
    """A match the scan accepted: where it is and which detector made it."""

    start: int
    end: int
    detector: Detector


@dataclass(frozen=True, slots=True)
class Decision:
    """What the scan can say from a position.

    `found` is the next match when it is certain to be the next one
    (`settled`); a found but unsettled match is still certain to be *a*
    violation, which a blocking policy acts on at once. `stop` is how far the
    text is known to hold no match start.
    """

    found: Found | None
    settled: bool
    stop: int


_UNSET: tuple[int, int] = (-1, -1)


def _first_valid(detector: Detector, text: str, pos: int) -> tuple[int, int] | None:
    """The first match at or after `pos` that `refine` accepts, as (start, end)."""
    gate = detector.required_any
    if gate is not None and gate.search(text, pos) is None:
        return None
    search = detector.pattern.search
    refine = detector.refine
    while True:
        match = search(text, pos)
        if match is None:
            return None
        start, end = match.span()
        if end > start:
            if refine is None:
                return start, end
            length = refine(match.group())
            if length > 0:
                return start, start + length
        pos = start + 1


def horizon(detector: Detector, text: str, pos: int) -> int:
    """The first position at or after `pos` where a match could still be forming.

    Matches starting before it are settled by the known `text`.
    """
    end = len(text)
    low = max(pos, end - detector.max_length - _LOOKAHEAD)
    tail = detector.partial_tail
    if tail is None:
        return low
    found = tail.search(text, low)
    return found.start() if found is not None else end


def horizons(detectors: Sequence[Detector], text: str, pos: int) -> list[int]:
    """Each detector's `horizon` over a streamed text known up to its end."""
    return [horizon(detector, text, pos) for detector in detectors]


def next_decision(
    text: str,
    pos: int,
    detectors: Sequence[Detector],
    cache: list[tuple[int, int] | None],
    limits: list[int] | None,
) -> Decision:
    """Decide what comes next from `pos`.

    Args:
        text: The known text (all of it, or a stream's buffer).
        pos: Where the scan stands; nothing before it is looked at again.
        detectors: In priority order.
        cache: Each detector's last proposal, reused while it lies ahead of
            `pos`; start with `[_UNSET] * len(detectors)` for each new `text`.
        limits: Each detector's horizon, or None when `text` is complete.
            Updated in place when `pos` has moved past a horizon.
    """
    best: tuple[int, int] | None = None
    best_rank = -1
    floor = len(text) if limits is not None else -1
    for rank, detector in enumerate(detectors):
        proposal = cache[rank]
        if proposal is _UNSET or (proposal is not None and proposal[0] < pos):
            proposal = _first_valid(detector, text, pos)
            cache[rank] = proposal
        limit = -1
        if limits is not None:
            limit = limits[rank]
            if limit < pos:
                limit = limits[rank] = horizon(detector, text, pos)
        if proposal is not None and (limits is None or proposal[0] < limit):
            if (
                best is None
                or proposal[0] < best[0]
                or (proposal[0] == best[0] and proposal[1] > best[1])
            ):
                best, best_rank = proposal, rank
        elif limits is not None and limit < floor:
            floor = limit
    if best is None:
        return Decision(None, settled=False, stop=len(text) if limits is None else floor)
    found = Found(best[0], best[1], detectors[best_rank])
    if limits is None or best[0] < floor:
        return Decision(found, settled=True, stop=best[0])
    return Decision(found, settled=False, stop=floor)


def scan(text: str, detectors: Sequence[Detector]) -> list[Found]:
    """Every match in a complete text, in order, none overlapping."""
    detectors = _candidates(text, detectors)
    if not detectors:
        return []
    cache: list[tuple[int, int] | None] = [_UNSET] * len(detectors)
    found: list[Found] = []
    pos = 0
    while True:
        decision = next_decision(text, pos, detectors, cache, None)
        if decision.found is None:
            return found
        found.append(decision.found)
        pos = decision.found.end


def required_gate(detectors: Sequence[Detector]) -> re.Pattern[str] | None:
    """One search for every detector's required strings at once.

    A text it does not match holds nothing any of the detectors could find,
    so a clean text costs one search instead of one per gate. None when some
    detector requires nothing (it must always be searched).

    Examples:
        >>> from tidemill.agents.guardrails._detectors import BUILTIN_DETECTORS
        >>> gate = required_gate(BUILTIN_DETECTORS)
        >>> gate.search("All done.") is None, gate.search("Call 555") is None
        (True, False)
    """
    if not detectors or any(detector.required_any is None for detector in detectors):
        return None
    needles = {needle for detector in detectors for needle in detector.required}
    # Longest first, so a needle is never cut short by one of its prefixes.
    ordered = sorted(needles, key=lambda needle: (-len(needle), needle))
    return re.compile("|".join(re.escape(needle) for needle in ordered))


def _candidates(text: str, detectors: Sequence[Detector]) -> Sequence[Detector]:
    """The detectors whose required strings `text` holds, in order.

    Detectors that share their required strings (the digits) share one search.
    """
    present: dict[str, bool] = {}
    kept: list[Detector] = []
    for detector in detectors:
        gate = detector.required_any
        if gate is not None:
            hit = present.get(gate.pattern)
            if hit is None:
                hit = present[gate.pattern] = gate.search(text) is not None
            if not hit:
                continue
        kept.append(detector)
    return kept


def redact(text: str, found: Sequence[Found]) -> str:
    """`text` with each match replaced by its detector's placeholder."""
    if not found:
        return text
    pieces: list[str] = []
    pos = 0
    for match in found:
        pieces.append(text[pos : match.start])
        pieces.append(match.detector.placeholder)
        pos = match.end
    pieces.append(text[pos:])
    return "".join(pieces)
