"""Loading flows from YAML and JSON files, inlining included files, and the JSON round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tidemill.errors import FlowValidationError
from tidemill.flows import Flow, Problem

SIMPLE_YAML = """
summary: Say hello
steps:
  - id: hello
    script: |
      def main(name):
          return "hello " + name
    inputs: {name: {expr: flow_input.name}}
"""


def load_problems(path: Path) -> list[Problem]:
    with pytest.raises(FlowValidationError) as info:
        Flow.load(path)
    assert info.value.source == str(path)
    return [Problem(p.step, p.field, p.message) for p in info.value.problems]


def test_load_yaml_names_the_flow_after_the_file(tmp_path: Path) -> None:
    (tmp_path / "hello.yaml").write_text(SIMPLE_YAML)
    flow = Flow.load(tmp_path / "hello.yaml")
    assert flow.name == "hello"
    assert flow.summary == "Say hello"
    assert flow.find("hello").kind == "script"


def test_a_name_in_the_file_wins(tmp_path: Path) -> None:
    (tmp_path / "hello.yml").write_text("name: greeter\n" + SIMPLE_YAML)
    assert Flow.load(str(tmp_path / "hello.yml")).name == "greeter"


def test_yaml_and_json_files_give_the_same_flow(tmp_path: Path, examples: Path) -> None:
    flow = Flow.load(examples / "refund.json")
    (tmp_path / "refund.yaml").write_text(
        json.dumps(json.loads((examples / "refund.json").read_text()))
    )
    assert Flow.load(tmp_path / "refund.yaml") == flow
    assert flow.find("auto").kind == "identity"
    assert flow.find("ask").settings.timeout == 7200.0  # type: ignore[union-attr]


def test_script_paths_are_inlined_relative_to_the_flow_file(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "step.py").write_text("def main():\n    return 1\n")
    (tmp_path / "flow.yaml").write_text("steps:\n  - id: s\n    script: {path: scripts/step.py}\n")
    script = Flow.load(tmp_path / "flow.yaml").find("s").script
    assert script is not None
    assert script.code == "def main():\n    return 1\n"
    assert script.path is None
    assert script.source_path == "scripts/step.py"


def test_a_missing_script_file_names_the_step(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text("steps:\n  - id: s\n    script: {path: nope.py}\n")
    assert load_problems(tmp_path / "flow.yaml") == [
        Problem("s", "script.path", f"no such file: {tmp_path / 'nope.py'}")
    ]


def test_a_script_file_with_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def main():\n    return (\n")
    (tmp_path / "flow.yaml").write_text("steps:\n  - id: s\n    script: {path: bad.py}\n")
    (problem,) = load_problems(tmp_path / "flow.yaml")
    assert (problem.step, problem.field) == ("s", "script.code")
    assert problem.message.startswith("bad.py, line 2: syntax error:")


def test_sub_flows_are_inlined_recursively_relative_to_each_file(tmp_path: Path) -> None:
    (tmp_path / "lib" / "deep").mkdir(parents=True)
    (tmp_path / "lib" / "deep" / "step.py").write_text("def main(n):\n    return n\n")
    (tmp_path / "lib" / "deep" / "leaf.yaml").write_text(
        "steps:\n  - id: leaf\n    script: {path: step.py}\n    inputs: {n: {expr: flow_input.n}}\n"
    )
    (tmp_path / "lib" / "child.yaml").write_text(
        "name: kid\nsteps:\n  - id: c\n    flow: deep/leaf.yaml\n"
    )
    (tmp_path / "main.yaml").write_text(
        "steps:\n  - id: sub\n    flow: {path: lib/child.yaml}\n    inputs: {n: 1}\n"
    )
    flow = Flow.load(tmp_path / "main.yaml")
    sub = flow.find("sub").flow
    assert sub is not None and sub.flow is not None
    assert (sub.path, sub.source_path, sub.flow.name) == (None, "lib/child.yaml", "kid")
    leaf = sub.flow.find("c").flow
    assert leaf is not None and leaf.flow is not None
    assert (leaf.source_path, leaf.flow.name) == ("deep/leaf.yaml", "leaf")
    leaf_script = leaf.flow.find("leaf").script
    assert leaf_script is not None
    assert leaf_script.code == "def main(n):\n    return n\n"


def test_include_cycles_are_problems(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("steps:\n  - id: to_b\n    flow: b.yaml\n")
    (tmp_path / "b.yaml").write_text("steps:\n  - id: to_a\n    flow: a.yaml\n")
    assert load_problems(tmp_path / "a.yaml") == [
        Problem(
            "to_a",
            "flow.path",
            "in the sub-flow of step 'to_b' (b.yaml): include cycle: a.yaml -> b.yaml -> a.yaml",
        )
    ]
    (tmp_path / "self.yaml").write_text("steps:\n  - id: me\n    flow: self.yaml\n")
    assert load_problems(tmp_path / "self.yaml") == [
        Problem("me", "flow.path", "include cycle: self.yaml -> self.yaml")
    ]


def test_the_same_file_twice_is_not_a_cycle(tmp_path: Path) -> None:
    (tmp_path / "leaf.yaml").write_text("steps: [{id: x, identity: {}}]\n")
    (tmp_path / "main.yaml").write_text(
        "steps:\n  - {id: one, flow: leaf.yaml}\n  - {id: two, flow: leaf.yaml}\n"
    )
    flow = Flow.load(tmp_path / "main.yaml")
    assert flow.find("one").flow == flow.find("two").flow


def test_problems_in_sub_flow_files(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text(
        "steps:\n  - id: x\n    script: {path: gone.py}\n  - id: y\n"
    )
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "main.yaml").write_text(
        "steps:\n"
        "  - {id: a, flow: broken.yaml}\n"
        "  - {id: b, flow: missing.yaml}\n"
        "  - {id: c, flow: list.yaml}\n"
    )
    found = load_problems(tmp_path / "main.yaml")
    assert found == [
        Problem(
            "x",
            "script.path",
            f"in the sub-flow of step 'a' (broken.yaml): no such file: {tmp_path / 'gone.py'}",
        ),
        Problem("b", "flow.path", f"no such file: {tmp_path / 'missing.yaml'}"),
        Problem("c", "flow.path", "list.yaml must hold a mapping (a flow), not list"),
        Problem(
            "y",
            "kind",
            "in the sub-flow of step 'a' (broken.yaml): the step has no kind; "
            "set one of script, flow, branch, parallel, for_each, approval, sleep, "
            "wait_for_event, identity, ai_action, ai_agent",
        ),
    ]


def test_parse_reads_paths_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def main():\n    return 2\n")
    text = "steps:\n  - id: s\n    script: {path: s.py}\n"
    flow = Flow.parse(text, base_dir=tmp_path)
    assert flow.find("s").script is not None
    with pytest.raises(FlowValidationError, match="no such file"):
        Flow.parse(text, base_dir=tmp_path / "elsewhere")


def test_parse_json_text() -> None:
    flow = Flow.parse('{"steps": [{"id": "a", "identity": {}}]}', format="json")
    assert flow.find("a").kind == "identity"
    with pytest.raises(FlowValidationError) as info:
        Flow.parse('{"steps": [}', format="json")
    assert info.value.problems[0].field == "json"
    assert info.value.problems[0].message.startswith("invalid JSON at line 1, column 12:")


def test_model_validate_keeps_paths_as_they_are() -> None:
    flow = Flow.model_validate({"steps": [{"id": "s", "script": {"path": "x.py"}}]})
    assert flow.find("s").script is not None
    assert flow.find("s").script.path == "x.py"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "content", "field", "message"),
    [
        ("missing.yaml", None, "file", "no such file: {path}"),
        (
            "flow.txt",
            "steps: []",
            "file",
            "{path} is not a flow file: use a .yaml, .yml or .json file",
        ),
        (
            "bad.yaml",
            "steps:\n  - id: a\n   identity: {}\n",
            "yaml",
            "invalid YAML at line 3, column 4:",
        ),
        ("bad.json", '{"steps": [}', "json", "invalid JSON at line 1, column 12:"),
        (
            "dup.yaml",
            "steps: []\nsteps: []\n",
            "yaml",
            "invalid YAML at line 2, column 1: found the key 'steps' twice",
        ),
        ("list.yaml", "- id: a\n", "flow", "a flow must be a mapping, not list"),
        ("empty.yaml", "", "flow", "the flow is empty"),
    ],
)
def test_unreadable_files(
    tmp_path: Path, name: str, content: str | None, field: str, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    (problem,) = load_problems(path)
    assert (problem.step, problem.field) == (None, field)
    assert problem.message.startswith(message.format(path=path))


def test_a_directory_is_not_a_flow_file(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    (problem,) = load_problems(tmp_path / "dir.yaml")
    assert problem.field == "file"
    assert problem.message.startswith(f"cannot read {tmp_path / 'dir.yaml'}")


def test_yaml_dates_stay_strings(tmp_path: Path) -> None:
    text = "summary: x\nsteps:\n  - {id: a, identity: {}, inputs: {day: 2024-01-31}}\n"
    assert Flow.parse(text).find("a").inputs["day"] == "2024-01-31"


def test_from_dict_does_not_change_its_argument(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def main(l):\n    return 1\n")
    data = {"steps": [{"id": "s", "script": {"path": "s.py"}, "inputs": {"l": [1]}}]}
    snapshot = json.loads(json.dumps(data))
    flow = Flow.from_dict(data, base_dir=tmp_path)
    assert data == snapshot
    data["steps"][0]["inputs"]["l"].append(2)  # type: ignore[index]
    assert flow.find("s").inputs["l"] == [1]


def test_the_json_round_trip_needs_no_files(tmp_path: Path, examples: Path) -> None:
    copy = tmp_path / "examples"
    shutil.copytree(examples, copy)
    flow = Flow.load(copy / "triage.yaml")
    stored = flow.model_dump_json()
    shutil.rmtree(copy)
    again = Flow.model_validate_json(stored)
    assert again == flow
    assert again.digest() == flow.digest()
    assert again.find("b").script == flow.find("b").script
    assert Flow.parse(stored, format="json") == flow


def test_digest_is_stable_across_formatting_and_key_order(tmp_path: Path) -> None:
    first = Flow.parse("steps:\n  - {id: a, identity: {}, inputs: {x: 1, y: 2}}\nsummary: s\n")
    second = Flow.parse(
        '{"summary": "s", "steps": [{"inputs": {"y": 2, "x": 1}, "identity": null, "id": "a"}]}',
        format="json",
    )
    assert first.digest() == second.digest()
    assert len(first.digest()) == 64
    changed = Flow.parse("steps:\n  - {id: a, identity: {}, inputs: {x: 1, y: 3}}\nsummary: s\n")
    assert changed.digest() != first.digest()


def test_digest_is_the_sha256_of_the_canonical_dump() -> None:
    import hashlib

    flow = Flow.parse("steps: [{id: a, identity: {}}]\n")
    canonical = json.dumps(flow.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    assert flow.digest() == hashlib.sha256(canonical.encode()).hexdigest()
    # A known value: changes only when the model's fields or defaults change.
    assert canonical.startswith(
        '{"concurrency":null,"description":"","inputs":{},"name":"","result":null,"steps":['
    )
