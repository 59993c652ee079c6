"""What the rule guardrail costs on ordinary text, whole and streamed.

The text is the guardrail tests' 40 clean paragraphs (support replies,
release notes, reports: 5,089 characters with dates, versions and order
numbers, and nothing the guardrail should find), so every detector has to
look at all of it.

- whole: `RuleGuardrail().check_output(paragraph)` for each paragraph,
  nanoseconds per character; once as written, once with the digits taken
  out (most detectors of personal data need a digit, and skip text without
  one);
- short: one short answer, microseconds per check;
- stream: the whole text fed to `guard_stream` in 6-character pieces (about
  a token each), microseconds per piece.

Each figure is the fastest of several repetitions. Run with
`.venv-bench/bin/python benchmarks/guardrails.py` (or `make bench`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from tidemill.agents.guardrails import RuleGuardrail, guard_stream

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/agents/guardrails"))
from guardrail_corpus import CLEAN_PARAGRAPHS

PIECE = 6
SHORT = "The report is ready: revenue grew in every region this quarter."


def fastest(action: Callable[[], object], repeat: int = 7) -> float:
    """Seconds the fastest of `repeat` calls took."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    guard = RuleGuardrail()
    paragraphs = list(CLEAN_PARAGRAPHS)
    plain = ["".join(ch for ch in p if not ch.isdigit()) for p in paragraphs]
    for text in (*paragraphs, *plain, SHORT):
        if not guard.check_output(text).passed:
            raise SystemExit(f"the guardrail flagged clean text: {text!r}")
    chars = sum(map(len, paragraphs))
    plain_chars = sum(map(len, plain))
    joined = " ".join(paragraphs)
    pieces = [joined[i : i + PIECE] for i in range(0, len(joined), PIECE)]

    def stream() -> None:
        guarded = guard_stream(guard)
        shown = [guarded.feed(piece) for piece in pieces]
        shown.append(guarded.flush())
        if "".join(shown) != joined:
            raise SystemExit("the stream guard changed clean text")

    whole = fastest(lambda: [guard.check_output(p) for p in paragraphs])
    no_digits = fastest(lambda: [guard.check_output(p) for p in plain])
    short = fastest(lambda: [guard.check_output(SHORT) for _ in range(1000)]) / 1000
    streamed = fastest(stream)
    print(f"Rule guardrail, {len(guard.detectors)} detectors, {len(paragraphs)} clean paragraphs")
    print(f"  whole, as written:   {whole / chars * 1e9:6.0f} ns per character ({chars:,} chars)")
    print(f"  whole, no digits:    {no_digits / plain_chars * 1e9:6.0f} ns per character")
    print(f"  short answer:        {short * 1e6:6.1f} us ({len(SHORT)} chars)")
    print(f"  stream:              {streamed / len(pieces) * 1e6:6.1f} us per {PIECE}-char piece")
    return 0


if __name__ == "__main__":
    sys.exit(main())
