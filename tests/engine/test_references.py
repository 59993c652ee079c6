"""Masking a job's secrets in what it prints: whole, in pieces, and however short."""

from __future__ import annotations

from unittest.mock import MagicMock

from tidemill.engine._step_env import Secrets
from tidemill.engine.workers._logs import LogWriter


def writer(*secrets: str) -> LogWriter:
    logs = MagicMock()
    logs.limit = 1 << 20
    return LogWriter("run", 1, logs, secrets=Secrets(secrets))


def test_a_secret_printed_in_two_writes_is_masked_across_flushes() -> None:
    out = writer("hunter2")
    out("stdout", "password: hun")
    first = out.take(final=False)
    out("stdout", "ter2 ok\n")
    rest = out.take()
    assert first == [("stdout", "password: ")]
    assert rest == [("stdout", "***" + " ok\n")]


def test_short_secrets_are_masked_and_the_longest_first() -> None:
    secrets = Secrets({"ab", "xabx", ""})
    assert secrets.mask("ab xabx") == "*** ***"
    assert secrets.longest == 4
    assert writer("pw").take() == []


def test_text_with_no_secret_goes_out_whole() -> None:
    out = writer("hunter2")
    out("stdout", "nothing here\n")
    out("stderr", "nor here\n")
    assert out.take(final=False) == [("stdout", "nothing here\n"), ("stderr", "nor here\n")]
