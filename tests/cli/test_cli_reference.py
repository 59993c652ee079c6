"""The CLI reference page is rendered from the real parser and filled in by the docs hook."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from tidemill.cli import build_parser
from tidemill.cli._reference import MARKER, command_parsers, render_reference, substitute

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def page() -> str:
    return render_reference()


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sections(page: str) -> dict[str, str]:
    """Each command's section, by the command's full name."""
    found = re.split(r"^## (.+?) \{ #[a-z0-9-]+ \}$", page, flags=re.MULTILINE)
    return dict(zip(found[1::2], found[2::2], strict=True))


def test_every_command_and_subcommand_has_a_section(page: str) -> None:
    progs = [parser.prog for parser, _ in command_parsers(build_parser()[0])]
    assert len(progs) > 20
    assert list(sections(page)) == progs
    assert "tidemill approvals reconcile" in progs


def test_every_option_and_argument_is_in_its_commands_section(page: str) -> None:
    by_prog = sections(page)
    for parser, _ in command_parsers(build_parser()[0]):
        section = by_prog[parser.prog]
        assert f"usage: {parser.prog}" in section
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            for option in action.option_strings:
                assert re.search(rf"`{re.escape(option)}[ `]", section), (parser.prog, option)
            if not action.option_strings:
                name = action.metavar or action.dest
                written = f"`[{name}]`" if action.nargs == argparse.OPTIONAL else f"`{name}`"
                assert written in section, (parser.prog, action)


def test_an_option_shows_its_help_choices_and_default(page: str) -> None:
    worker = sections(page)["tidemill worker"]
    (lease,) = [line for line in worker.splitlines() if line.startswith("| `--lease S`")]
    assert "another worker takes over a step whose lease ran out" in lease
    assert lease.endswith("| `30.0` |")
    assert "(default: 30.0)" not in lease  # said once, in its column
    listing = sections(page)["tidemill runs list"]
    assert "One of `queued`, `running`, `waiting`, `succeeded`, `failed`, `cancelled`." in listing
    answer = sections(page)["tidemill approvals answer"]
    assert re.search(r"^\| `--text TEXT` \| the answer Required\. \|", answer, re.MULTILINE)


def test_a_command_links_its_subcommands(page: str) -> None:
    runs = sections(page)["tidemill runs"]
    assert "| [`why`](#tidemill-runs-why) | what a run waits for, and how to unblock it |" in runs


def test_text_outside_code_is_escaped_for_markdown() -> None:
    parser = argparse.ArgumentParser(prog="demo", description="Keeps <b>|x|</b> `a|b`.")
    parser.add_argument("--mode", help="one of a|b, for *every* run_id", default="a")
    page = render_reference(parser)
    assert "Keeps &lt;b>\\|x\\|&lt;/b> `a|b`." in page
    assert "| `--mode MODE` | one of a\\|b, for \\*every\\* run\\_id | `a` |" in page


def test_substitute_replaces_the_marker_and_refuses_a_page_without_it() -> None:
    filled = substitute(f"# CLI\n\nIntro.\n\n{MARKER}\n")
    assert filled.startswith("# CLI\n\nIntro.\n\n## tidemill { #tidemill }\n")
    assert MARKER not in filled
    with pytest.raises(ValueError, match="no <!-- tidemill-cli-reference -->"):
        substitute("# CLI\n")


def test_the_committed_page_holds_only_an_intro_and_the_marker() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    assert text.count(MARKER) == 1
    assert "## tidemill" not in text


def test_the_hook_fills_the_cli_page_and_leaves_others_alone(hooks: ModuleType) -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    cli = SimpleNamespace(file=SimpleNamespace(src_uri="cli.md"))
    filled = hooks.on_page_markdown(text, page=cli, config={}, files=None)
    assert filled == substitute(text)
    assert "## tidemill approvals extend { #tidemill-approvals-extend }" in filled
    other = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"))
    assert hooks.on_page_markdown("# Home\n", page=other, config={}, files=None) == "# Home\n"
    with pytest.raises(ValueError, match="no <!-- tidemill-cli-reference -->"):
        hooks.on_page_markdown("# CLI\n", page=cli, config={}, files=None)


def test_mkdocs_registers_the_hook() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^hooks:\n  - docs_hooks\.py$", config, re.MULTILINE)
