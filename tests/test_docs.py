"""The README's examples and the demo run as documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_readme_examples_run_in_order() -> None:
    blocks = python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    namespace: dict[str, object] = {"__name__": "readme"}
    for index, block in enumerate(blocks):
        try:
            exec(compile(block, f"README.md block {index}", "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"README block {index} failed: {exc!r}\n{block}") from exc


def test_the_readme_is_a_five_minute_read() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readmes_links_point_at_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing


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


def test_the_readme_flow_is_the_example_file_and_every_example_flow_loads() -> None:
    from tidemill.flows import Flow

    readme = (ROOT / "README.md").read_text()
    (block,) = re.findall(r"```yaml\n(name: greet.*?)```", readme, flags=re.DOTALL)
    example = (ROOT / "examples" / "flows" / "greet.yaml").read_text()
    assert example.endswith(block)
    flows = sorted((ROOT / "examples" / "flows").glob("*.yaml"))
    assert len(flows) >= 2
    for path in flows:
        assert Flow.load(path).steps


def test_the_flow_demo_pauses_approves_and_finishes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "flow_demo.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "The run is waiting: step 'approve' asks 'Ship this order?'" in out
    assert "tidemill approvals approve" in out
    assert "checking credit for ada@example.com" in out
    assert '"amount": 279.7' in out
    assert '"approved_by": "demo"' in out
    assert (tmp_path / ".tidemill" / "demo.db").is_file()


def test_the_support_triage_demo_waits_is_approved_from_the_cli_and_finishes(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "support_triage.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "offline scripted models (no API key is set)" in out
    assert 'The run is waiting: the agent wants to call issue_refund({"order_id": "A-1001"' in out
    assert "approved by demo" in out
    assert "lookup_order" in out and "refunded 129.00 EUR on A-1001" in out
    assert "pay       attempt 1  succeeded" in out and "(a child run of a tool call)" in out
    assert "Usage: 4 model calls" in out
    assert '"category": "refund"' in out
    assert (tmp_path / ".tidemill" / "triage.db").is_file()
