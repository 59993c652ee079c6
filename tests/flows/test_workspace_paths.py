"""Flows that name workspace scripts and sub-flows by path: read through `Includes`, or refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tidemill.errors import FlowValidationError
from tidemill.flows import WORKSPACE_PATH, Flow

FLOW = {
    "steps": [
        {"id": "greet", "script": {"path": "f/support/greet"}, "inputs": {"name": "ada"}},
        {"id": "child", "flow": "f/support/child"},
    ]
}


class FakeIncludes:
    """A workspace with one script and one flow, which itself includes the script."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def script(self, path: str) -> tuple[str, str]:
        self.asked.append(path)
        if path != "f/support/greet":
            raise LookupError(f"no workspace script {path} that ada may read")
        return "def main(name):\n    return 'hi ' + name\n", f"{path}@3"

    def flow(self, path: str) -> tuple[dict[str, Any], str]:
        self.asked.append(path)
        if path == "f/support/loop":
            return {"steps": [{"id": "again", "flow": "f/support/loop"}]}, f"{path}@1"
        if path != "f/support/child":
            raise LookupError(f"no workspace flow {path} that ada may read")
        step = {"id": "inner", "script": {"path": "f/support/greet"}, "inputs": {"name": "x"}}
        return {"name": "child", "steps": [step]}, f"{path}@7"


def test_workspace_paths_are_told_from_file_names() -> None:
    assert WORKSPACE_PATH.match("f/support/greet")
    assert WORKSPACE_PATH.match("u/ada/tools/summarise")
    for text in ("greet.py", "f/support/greet.py", "child.yaml", "f/support", "f/Up/x", "f/a/b\n"):
        assert not WORKSPACE_PATH.match(text), text


def test_includes_inline_scripts_and_sub_flows_with_their_versions() -> None:
    includes = FakeIncludes()
    flow = Flow.from_dict(FLOW, includes=includes)
    greet, child = flow.find("greet"), flow.find("child")
    assert greet.script is not None and greet.script.code is not None
    assert greet.script.source_path == "f/support/greet@3"
    assert child.flow is not None and child.flow.flow is not None
    assert child.flow.source_path == "f/support/child@7"
    inner = child.flow.flow.find("inner").script
    assert inner is not None and inner.source_path == "f/support/greet@3"
    assert includes.asked == ["f/support/greet", "f/support/child", "f/support/greet"]


def test_without_a_workspace_a_workspace_path_is_a_problem_not_a_file(tmp_path: Path) -> None:
    # A file of that name next to the flow is not read: the path names a workspace item.
    (tmp_path / "f" / "support").mkdir(parents=True)
    (tmp_path / "f" / "support" / "greet").write_text("def main(name):\n    return name\n")
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(FLOW, base_dir=tmp_path)
    text = str(caught.value)
    assert "f/support/greet names a workspace script" in text
    assert "f/support/child names a workspace flow" in text
    assert "tidemill run f/<folder>/<name>" in text


def test_an_unreadable_include_is_reported_with_the_readers_words() -> None:
    flow = {"steps": [{"id": "s", "script": {"path": "f/ops/secret_script"}}]}
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(flow, includes=FakeIncludes())
    assert "no workspace script f/ops/secret_script that ada may read" in str(caught.value)


def test_a_workspace_flow_including_itself_is_a_cycle() -> None:
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict({"steps": [{"id": "a", "flow": "f/support/loop"}]}, includes=FakeIncludes())
    assert "include cycle" in str(caught.value)
