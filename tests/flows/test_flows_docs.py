"""The flow format's pages are correct and complete: their flows load, every key is documented.

The pages are `docs/flows/*.md` (the format), `docs/ai-steps.md` (the AI
kinds) and `docs/engine/index.md`. Their Python blocks run in
`tests/test_docs_site.py`, page by page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from tidemill.flows import Flow

DOCS = Path(__file__).resolve().parents[2] / "docs"
FLOW_PAGES = sorted((DOCS / "flows").glob("*.md"))
AI_PAGE = DOCS / "ai-steps.md"
PAGES = [*FLOW_PAGES, AI_PAGE, DOCS / "engine" / "index.md"]


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), flags=re.DOTALL | re.M)


FLOW_BLOCKS = [
    (page, index, block)
    for page in PAGES
    for index, block in enumerate(blocks(page, "yaml"))
    if re.search(r"^steps:", block, re.MULTILINE)
]


def test_the_pages_have_examples() -> None:
    assert len(FLOW_PAGES) >= 4
    assert sum(1 for page, _, _ in FLOW_BLOCKS if page in FLOW_PAGES) >= 10
    assert sum(len(blocks(page, "python")) for page in FLOW_PAGES) >= 4
    assert sum(1 for page, _, _ in FLOW_BLOCKS if page == AI_PAGE) >= 3


@pytest.mark.parametrize(
    ("page", "index", "block"),
    FLOW_BLOCKS,
    ids=[f"{page.relative_to(DOCS)}:{index}" for page, index, _ in FLOW_BLOCKS],
)
def test_every_yaml_flow_in_the_docs_loads(
    page: Path, index: int, block: str, tmp_path: Path
) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "summarise.py").write_text("def main():\n    return 'short'\n")
    (tmp_path / "child.yaml").write_text("steps: [{id: add, identity: {}}]\n")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "refund.yaml").write_text(
        "inputs: {type: object, properties: {order_id: {type: string}}}\n"
        "steps: [{id: pay, identity: {}}]\n"
    )
    Flow.parse(block, base_dir=tmp_path, source=f"docs/{page.relative_to(DOCS)} yaml {index}")


def test_every_kind_and_step_key_is_documented() -> None:
    from tidemill.flows import Step

    text = "\n".join(page.read_text() for page in FLOW_PAGES)
    for key in Step.model_fields:
        assert f"`{key}`" in text, key
    for key in Flow.model_fields:
        assert f"`{key}`" in text, key


def test_every_key_of_the_ai_kinds_is_documented() -> None:
    from tidemill.flows import (
        AgentLimits,
        AgentMemory,
        AgentQuestions,
        AgentToolSpec,
        AIAction,
        AIAgent,
        MCPTools,
    )
    from tidemill.flows._ai import AgentDelegation, Specialist, SpecialistBudget

    models: list[type[BaseModel]] = [
        AIAction,
        AIAgent,
        AgentToolSpec,
        AgentLimits,
        AgentMemory,
        AgentQuestions,
        MCPTools,
        Specialist,
        SpecialistBudget,
        AgentDelegation,
    ]
    text = AI_PAGE.read_text()
    for model in models:
        for key in model.model_fields:
            assert f"`{key}`" in text, f"{model.__name__}.{key}"
