"""The README's examples and the demo run as documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_readme_examples_run_in_order() -> None:
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 5
    namespace: dict[str, object] = {"__name__": "readme"}
    for index, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md block {index}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"README block {index} failed: {exc!r}\n{block}") from exc


def test_readme_has_the_two_commands_on_its_first_screen() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:20])
    assert "make demo" in first_screen
    assert "make test" in first_screen


def test_the_demo_pauses_approves_and_finishes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "approval_demo.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "PAUSED on thread" in out
    assert "issue_refund" in out
    assert "approval: edited by dana" in out
    assert "refunded 99.00 EUR on A-1001" in out
    assert "TRANSCRIPT" in out and "USAGE" in out
    assert (tmp_path / ".tidemill" / "demo.db").is_file()
