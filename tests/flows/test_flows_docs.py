"""The examples in docs/flows/index.md are correct: flows load, Python blocks run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tidemill.flows import Flow

DOC = Path(__file__).resolve().parents[2] / "docs" / "flows" / "index.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


FLOW_BLOCKS = [block for block in blocks("yaml") if re.search(r"^steps:", block, re.MULTILINE)]


def test_the_doc_has_examples() -> None:
    assert len(FLOW_BLOCKS) >= 10
    assert len(blocks("python")) >= 4


@pytest.mark.parametrize("index", range(len(FLOW_BLOCKS)))
def test_every_yaml_flow_in_the_doc_loads(index: int, tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "summarise.py").write_text("def main():\n    return 'short'\n")
    (tmp_path / "child.yaml").write_text("steps: [{id: add, identity: {}}]\n")
    Flow.parse(FLOW_BLOCKS[index], base_dir=tmp_path, source=f"docs/flows/index.md block {index}")


def test_python_blocks_run_in_order() -> None:
    namespace: dict[str, object] = {"__name__": "flows_doc"}
    for index, block in enumerate(blocks("python")):
        exec(compile(block, f"docs/flows/index.md python block {index}", "exec"), namespace)


def test_every_kind_and_step_key_is_documented() -> None:
    from tidemill.flows import Step

    text = DOC.read_text()
    for key in Step.model_fields:
        assert f"`{key}`" in text, key
