"""A failed step's hint is printed wherever its error is: `run`, `runs show`, `runs why`, `worker`.

Before, the hint (the variable to set, a did-you-mean) appeared only with `--json`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cli_support import cli, write_flow

from tidemill.cli._worker import _Reporter
from tidemill.engine import Engine
from tidemill.errors import RunFailed
from tidemill.store import JobRow

pytestmark = pytest.mark.timeout(60)

ASK = {
    "name": "ask",
    "steps": [{"id": "ask", "ai_action": {"model": "openai:gpt-4o-mini", "prompt": "Hi"}}],
}
HINT = (
    "hint: Set OPENAI_API_KEY in the worker's environment, or read the key from another "
    "variable with `api_key: env:NAME` in the step's model settings."
)


def test_run_show_and_why_print_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    code, _, err = cli(capsys, "run", write_flow(tmp_path, ASK), "--db", db)
    assert code == 1
    assert "MissingCredentialsError: No API key for the openai provider." in err
    lines = err.splitlines()
    failed = next(i for i, line in enumerate(lines) if line.lstrip().startswith("failed"))
    assert lines[failed + 1].strip() == HINT  # under the step that failed
    report = next(i for i, line in enumerate(lines) if " failed at step 'ask'" in line)
    assert lines[report + 1] == f"  {HINT}"
    assert "api_key=" not in err

    with Engine(db) as engine:
        (info,) = engine.runs()
    code, out, _ = cli(capsys, "runs", "show", info.id, "--db", db)
    assert code == 0
    assert f"hint      {HINT.removeprefix('hint: ')}" in out.splitlines()
    code, out, _ = cli(capsys, "runs", "why", info.id, "--db", db)
    assert code == 0
    assert out.splitlines()[1] == f"  {HINT}"


def test_a_step_without_a_hint_prints_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    boom = {"steps": [{"id": "boom", "script": "def main():\n    raise ValueError('bad')\n"}]}
    code, _, err = cli(capsys, "run", write_flow(tmp_path, boom), "--db", db)
    assert code == 1
    assert "ValueError: bad" in err
    assert "hint:" not in err


async def test_the_worker_logs_the_hint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tidemill.engine import AsyncEngine

    async with AsyncEngine(f"sqlite:///{tmp_path}/t.db") as engine:
        run_id = await engine.submit(write_flow(tmp_path, ASK))
        async with engine.worker(poll=0.05):
            with pytest.raises(RunFailed):
                await engine.wait(run_id, timeout=30)
        (job,) = await engine.jobs(run_id)
        assert isinstance(job, JobRow)
        reporter = _Reporter(engine.store)
        with caplog.at_level(logging.INFO, logger="tidemill"):
            reporter.event("finished", job)
            await reporter.drain()
    assert f"({HINT})" in caplog.text
