"""Fuzzy, ranked search over workspace items, in memory.

The caller builds a `SearchIndex` once from the entries it may list (path,
kind, summary and description of each item) and keeps it until the workspace
changes. A search splits the query and every entry into words (paths split on
`/`, `_`, `-` and `.`; everything lower-cased, punctuation dropped by
`rapidfuzz.utils.default_process`) and matches query words against entry
words with `rapidfuzz.fuzz.ratio`, so a typo (`tirage`), a prefix (`tri`) or
another word order (`refund order`) still finds an item. Each word also has a
stem (`stem`: one English ending dropped, cut to six letters), so another
form of a word (`shipping` for `shipment`, `notify` for `notification`,
`onbaording` for `onboard`) matches too, a little below the word itself.

How an entry is scored (0 to 100, higher is better):

* Each query word takes its best match among the entry's words: the word
  similarity (`fuzz.ratio`, at least `WORD_CUTOFF`; a prefix of a word scores
  at least 90; a match of stems, at least `STEM_CUTOFF`, counts 0.9 of the
  stems' similarity) times the weight of the field the word is in: the
  path's last segment 1.0, the summary 0.95, the other path segments 0.9,
  the description 0.8. So a name or summary match outranks a
  description-only one.
* The entry's score is the mean over the query words; a word that matches
  nothing counts 0. Entries scoring under `SCORE_CUTOFF` (60) are dropped, so
  a query that matches nothing sensible returns `[]`, and a query of two words
  needs both to match (a description-only match of both still passes).
* Ties rank the entry with the shorter last segment first (`triage` before
  `triage_bot` for `triage`), then by path.

A query of only whitespace lists entries in path order with score 0; a query
with no letters or digits at all (`.*[(`) matches nothing. Queries are cut to
`MAX_QUERY_CHARS` characters and `MAX_QUERY_WORDS` distinct words.

Examples:
    >>> index = SearchIndex([
    ...     SearchEntry("f/support/agents/triage", "flow", "Triage support tickets"),
    ...     SearchEntry("f/billing/order_refund", "script", "Refund an order"),
    ...     SearchEntry("u/alice/notes", "variable", description="Notes on triage"),
    ... ])
    >>> [hit.path for hit in index.search("tirage")]
    ['f/support/agents/triage', 'u/alice/notes']
    >>> index.search("refund order")[0]
    SearchHit(path='f/billing/order_refund', kind='script', summary='Refund an order', score=100.0)
    >>> index.search("triage", kinds={"variable"})[0].path
    'u/alice/notes'
    >>> index.search("kubernetes")
    []
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from rapidfuzz import fuzz, process, utils

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "SCORE_CUTOFF",
    "STEM_CUTOFF",
    "WORD_CUTOFF",
    "SearchEntry",
    "SearchHit",
    "SearchIndex",
    "stem",
]

SCORE_CUTOFF = 60.0
"""The lowest score a hit can have; entries scoring less are not returned."""

WORD_CUTOFF = 75.0
"""The lowest `fuzz.ratio` at which a query word matches an entry word."""

MAX_QUERY_CHARS = 256
"""A longer query is cut to its first `MAX_QUERY_CHARS` characters."""

MAX_QUERY_WORDS = 8
"""Only the first `MAX_QUERY_WORDS` distinct words of a query are searched."""

_MIN_PREFIX = 2
"""A query word this long or longer also matches the words it starts."""

_MAX_VARIANTS = 32
"""How many entry words (the most similar) one query word may match."""

STEM_CUTOFF = 80.0
"""The lowest `fuzz.ratio` at which a query word's stem matches an entry word's stem."""

_STEM_WEIGHT = 0.9
"""A match by stem only (`shipping` for `shipment`) counts this much of its similarity."""

_STEM_CHARS = 6
"""Stems are cut to this many characters: `notification` and `notify` share `notifi`."""

_MIN_STEMMED = 4
"""Words shorter than this have no stem: they match as they are."""

_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ers", "er", "ies", "es", "ed", "s")
"""English endings dropped to find a word's stem, longest first; the stem keeps 3 letters."""


# Field weights, best first: the path's last segment, the summary, the other
# path segments, the description.
_NAME, _SUMMARY, _FOLDER, _DESCRIPTION = 1.0, 0.95, 0.9, 0.8


@dataclass(frozen=True, slots=True)
class SearchEntry:
    """One item the caller may list, as the index sees it.

    Attributes:
        path: The item's workspace path, such as `f/support/agents/triage`.
        kind: The item's kind: `script`, `flow`, `resource`, `variable` or
            `resource_type`.
        summary: A one-line summary.
        description: A longer description.
    """

    path: str
    kind: str
    summary: str = ""
    description: str = ""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result.

    Attributes:
        path: The item's workspace path.
        kind: The item's kind.
        summary: The item's summary.
        score: How well the item matches, 0 to 100 (higher is better); 0 when
            the query was empty.
    """

    path: str
    kind: str
    summary: str
    score: float


def _words(text: str) -> list[str]:
    """The searchable words of `text`: lower case, letters and digits only."""
    return utils.default_process(text).split()


def stem(word: str) -> str:
    """A word's stem, to match other forms of it: one English ending off, cut to 6 letters.

    Examples:
        >>> [stem(w) for w in ("shipping", "shipment", "notification", "notify", "user")]
        ['ship', 'ship', 'notifi', 'notify', 'user']
    """
    if len(word) < _MIN_STEMMED or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:  # shipp(ing) -> ship
        word = word[:-1]
    return word[:_STEM_CHARS]


class SearchIndex:
    """A fuzzy search over a fixed list of entries.

    Built once from a list of entries (the caller caches it and rebuilds when
    the workspace changes); searching does not change it, so one index may be
    searched from many threads.

    Args:
        entries: The entries to search, in any order. Two entries may share a
            path if their kinds differ (a script and a flow, say).
    """

    __slots__ = (
        "_entries",
        "_path_order",
        "_postings",
        "_stem_words",
        "_stems",
        "_tiebreak",
        "_vocab",
    )

    def __init__(self, entries: Sequence[SearchEntry]) -> None:
        self._entries: tuple[SearchEntry, ...] = tuple(entries)
        count = len(self._entries)
        self._path_order: tuple[int, ...] = tuple(
            sorted(range(count), key=lambda i: (self._entries[i].path, self._entries[i].kind))
        )
        # Rank of each entry among equal scores: shorter last segment first, then path.
        names = [self._entries[i].path.rsplit("/", 1)[-1] for i in range(count)]
        by_tie = sorted(range(count), key=lambda i: (len(names[i]), self._entries[i].path))
        tiebreak = [0] * count
        for rank, i in enumerate(by_tie):
            tiebreak[i] = rank
        self._tiebreak: tuple[int, ...] = tuple(tiebreak)

        # word -> {entry: best field weight of the word in that entry}
        best: dict[str, dict[int, float]] = {}
        for i, entry in enumerate(self._entries):
            *folders, name = entry.path.split("/")
            fields = (
                (_NAME, _words(name)),
                (_SUMMARY, _words(entry.summary)),
                (_FOLDER, _words(" ".join(folders))),
                (_DESCRIPTION, _words(entry.description)),
            )
            for weight, words in fields:
                for word in words:
                    seen = best.setdefault(word, {})
                    if seen.get(i, 0.0) < weight:
                        seen[i] = weight
        self._vocab: list[str] = sorted(best)
        # For each vocabulary word: (weight, entries with the word at that weight), best first.
        postings: list[tuple[tuple[float, tuple[int, ...]], ...]] = []
        for word in self._vocab:
            groups: dict[float, list[int]] = {}
            for i, weight in best[word].items():
                groups.setdefault(weight, []).append(i)
            postings.append(
                tuple((w, tuple(ids)) for w, ids in sorted(groups.items(), reverse=True))
            )
        self._postings = tuple(postings)
        # stem -> the vocabulary words (by index) that have it
        stems: dict[str, list[int]] = {}
        for v, word in enumerate(self._vocab):
            if len(word) >= _MIN_STEMMED:
                stems.setdefault(stem(word), []).append(v)
        self._stems: list[str] = sorted(stems)
        self._stem_words: tuple[tuple[int, ...], ...] = tuple(tuple(stems[s]) for s in self._stems)

    def __len__(self) -> int:
        """The number of entries in the index."""
        return len(self._entries)

    def search(
        self,
        query: str,
        *,
        kinds: Collection[str] | None = None,
        limit: int = 20,
        allowed: Callable[[str], bool] | None = None,
    ) -> list[SearchHit]:
        """Return the entries matching `query`, best first.

        Args:
            query: Words to look for, in any order; typos and prefixes are
                tolerated. Only whitespace lists the entries in path order
                with score 0.
            kinds: Only entries of these kinds, such as `{"script", "flow"}`;
                `None` for every kind.
            limit: The most hits to return, at least 1.
            allowed: A check of the caller's permission on a path. Entries it
                refuses are skipped before the limit applies, so the caller
                still gets `limit` hits when enough readable entries match.
                It is called lazily, best match first, only until `limit`
                hits are found.

        Returns:
            Up to `limit` hits, best first.

        Raises:
            ValueError: If `limit` is not a positive integer.
            TypeError: If `query` is not a string or `kinds` is a single string.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}.")
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}.")
        if isinstance(kinds, str):
            raise TypeError(
                f"kinds must be a collection of kinds, such as {{{kinds!r}}}, not a string."
            )
        wanted = None if kinds is None else frozenset(kinds)

        if not query.strip():
            ranked: Iterable[tuple[int, float]] = ((i, 0.0) for i in self._path_order)
        else:
            ranked = self._rank(query)

        hits: list[SearchHit] = []
        for i, score in ranked:
            entry = self._entries[i]
            if wanted is not None and entry.kind not in wanted:
                continue
            if allowed is not None and not allowed(entry.path):
                continue
            hits.append(SearchHit(entry.path, entry.kind, entry.summary, score))
            if len(hits) == limit:
                break
        return hits

    def _rank(self, query: str) -> Iterator[tuple[int, float]]:
        """Yield the entries scoring at least `SCORE_CUTOFF` for `query`, best first, with scores.

        Lazy: ties are put in order only when reached, and `search` stops at its limit.
        """
        words = list(dict.fromkeys(_words(query[:MAX_QUERY_CHARS])))[:MAX_QUERY_WORDS]
        if not words or not self._vocab:
            return
        totals: dict[int, float] = {}
        for n, word in enumerate(words):
            matches = [
                (similarity * weight, ids)
                for v, similarity in self._variants(word)
                for weight, ids in self._postings[v]
            ]
            # Ascending, so an entry's best match for the word is written last.
            matches.sort(key=itemgetter(0))
            best: dict[int, float] = {}
            for score, ids in matches:
                best.update(dict.fromkeys(ids, score))
            if n == 0:
                totals = best
            else:
                for i, score in best.items():
                    totals[i] = totals.get(i, 0.0) + score
        count = len(words)
        needed = SCORE_CUTOFF * count - 1e-9
        ranked = sorted(totals.items(), key=itemgetter(1), reverse=True)
        for total, group in groupby(ranked, key=itemgetter(1)):
            if total < needed:
                return
            score = min(round(total / count, 2), 100.0)
            for i in sorted((i for i, _ in group), key=self._tiebreak.__getitem__):
                yield i, score

    def _variants(self, word: str) -> list[tuple[int, float]]:
        """The vocabulary words `word` matches, as (index, similarity), most similar first."""
        found: dict[int, float] = {
            v: similarity
            for _, similarity, v in process.extract(
                word,
                self._vocab,
                scorer=fuzz.ratio,
                processor=None,
                score_cutoff=WORD_CUTOFF,
                limit=_MAX_VARIANTS,
            )
        }
        if len(word) >= _MIN_STEMMED:
            for _, similarity, n in process.extract(
                stem(word),
                self._stems,
                scorer=fuzz.ratio,
                processor=None,
                score_cutoff=STEM_CUTOFF,
                limit=_MAX_VARIANTS,
            ):
                for v in self._stem_words[n]:
                    if found.get(v, 0.0) < similarity * _STEM_WEIGHT:
                        found[v] = similarity * _STEM_WEIGHT
        if len(word) >= _MIN_PREFIX:
            vocab = self._vocab
            v = bisect_left(vocab, word)
            while v < len(vocab) and vocab[v].startswith(word):
                prefix = 90.0 + 10.0 * len(word) / len(vocab[v])
                if found.get(v, 0.0) < prefix:
                    found[v] = prefix
                v += 1
        return heapq.nlargest(_MAX_VARIANTS, found.items(), key=lambda item: item[1])
