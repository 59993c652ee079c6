"""The `tidemill` command line as Markdown: the docs site's CLI reference.

`render_reference` walks the real argument parser (`tidemill.cli.build_parser`)
and writes one section per command and subcommand: its usage, its
description, a table of its arguments (each with its help, its choices and
its default) and its epilog. The docs site's `cli.md` holds only an intro
and `MARKER`; a build hook calls `substitute` to put the reference in its
place, so the page cannot drift from the parser.

Examples:
    >>> page = render_reference()
    >>> "## tidemill runs why" in page and "`--concurrency N`" in page
    True
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

__all__ = ["MARKER", "USAGE_WIDTH", "command_parsers", "render_reference", "substitute"]

MARKER = "<!-- tidemill-cli-reference -->"
"""The line of a page that `substitute` replaces with the reference."""

USAGE_WIDTH = 88
"""Columns the usage lines are wrapped at (argparse would use the terminal's)."""

_CODE = re.compile(r"(`[^`]*`)")
"""Code spans, which Markdown cells keep verbatim."""

_ESCAPES = {"&": "&amp;", "<": "&lt;", "|": "\\|", "*": "\\*", "_": "\\_", "\\": "\\\\"}
"""What text outside code spans would otherwise read as Markdown or HTML, escaped."""

_SPECIAL = re.compile(r"[&<|*_\\]")


def command_parsers(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[argparse.ArgumentParser, str]]:
    """Every parser under `parser`, itself first, depth-first in declaration order.

    Each comes with the one-line help its parent gave it (empty for `parser`).

    Examples:
        >>> from tidemill.cli import build_parser
        >>> [p.prog for p, _ in command_parsers(build_parser()[0])][:3]
        ['tidemill', 'tidemill run', 'tidemill worker']
    """
    yield from _walk(parser, "")


def _walk(
    parser: argparse.ArgumentParser, summary: str
) -> Iterator[tuple[argparse.ArgumentParser, str]]:
    yield parser, summary
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, help_text in _children(action):
                yield from _walk(child, help_text)


def render_reference(parser: argparse.ArgumentParser | None = None, *, level: int = 2) -> str:
    """Markdown for every command and subcommand of `parser`.

    Args:
        parser: The parser to document; by default `tidemill.cli.build_parser()`'s.
        level: The heading level of each command's section (`##` by default);
            the sections are flat, one per command, in the order of `--help`.

    Returns:
        The sections, each headed by the command's full name (`tidemill runs
        list`, with that as its anchor, `#tidemill-runs-list`) and holding its
        usage, description, arguments and epilog.
    """
    if parser is None:
        from tidemill.cli import build_parser

        parser = build_parser()[0]
    sections = [_section(found, summary, level) for found, summary in command_parsers(parser)]
    return "\n".join(sections)


def substitute(markdown: str, parser: argparse.ArgumentParser | None = None) -> str:
    r"""`markdown` with its `MARKER` line replaced by `render_reference(parser)`.

    Raises:
        ValueError: `markdown` does not hold the marker.

    Examples:
        >>> substitute("# CLI\n\n" + MARKER + "\n").startswith("# CLI\n\n## tidemill")
        True
    """
    if MARKER not in markdown:
        raise ValueError(f"the page has no {MARKER} to replace")
    return markdown.replace(MARKER, render_reference(parser).rstrip("\n"), 1)


def _anchor(prog: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", prog.lower()).strip("-")


def _section(parser: argparse.ArgumentParser, summary: str, level: int) -> str:
    formatter = parser._get_formatter()
    lines = [f"{'#' * level} {parser.prog} {{ #{_anchor(parser.prog)} }}", ""]
    lines += ["```text", _usage(parser), "```", ""]
    description = parser.description or summary
    if description:
        lines += [*_paragraphs(_fill_prog(description, parser.prog)), ""]
    subcommands = [
        (child, help_text)
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for child, help_text in _children(action)
    ]
    if subcommands:
        lines += ["| command | what it does |", "| --- | --- |"]
        for child, help_text in subcommands:
            name = child.prog.rsplit(" ", 1)[-1]
            link = f"[`{name}`](#{_anchor(child.prog)})"
            lines.append(f"| {link} | {_cell(help_text)} |")
        lines.append("")
    rows = [_row(action, formatter) for action in _documented(parser)]
    if rows:
        lines += ["| argument | what it is | default |", "| --- | --- | --- |", *rows, ""]
    if parser.epilog:
        lines += ["```text", _fill_prog(parser.epilog, parser.prog).strip("\n"), "```", ""]
    return "\n".join(lines)


def _children(
    action: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Iterator[tuple[argparse.ArgumentParser, str]]:
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    for name, child in action.choices.items():
        yield child, helps.get(name, "")


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _fill_prog(text: str, prog: str) -> str:
    return text.replace("%(prog)s", prog)


def _paragraphs(text: str) -> list[str]:
    """A description as Markdown paragraphs, each on one line."""
    blocks = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text)]
    paragraphs: list[str] = []
    for block in filter(None, blocks):
        paragraphs += [_cell(block), ""]
    return paragraphs[:-1]


def _documented(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments worth a row: not `--help`, not hidden, not the subcommand slot."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and action.help != argparse.SUPPRESS
    ]


def _row(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    invocation = ", ".join(f"`{form}`" for form in _forms(action))
    text = " ".join(formatter._expand_help(action).split()) if action.help else ""
    default = _default(action)
    if default:  # said once, in its column
        text = text.replace(f" (default: {action.default})", "")
    notes = [_cell(text)] if text else []
    if action.choices is not None:
        notes.append("One of " + ", ".join(f"`{choice}`" for choice in action.choices) + ".")
    if action.required and action.option_strings:
        notes.append("Required.")
    return f"| {invocation} | {' '.join(notes)} | {default} |"


def _forms(action: argparse.Action) -> list[str]:
    """How the argument is written: `FLOW`, or each option string with its value."""
    if not action.option_strings:
        return [_metavar(action, action.dest)]
    if action.nargs == 0:
        return list(action.option_strings)
    value = _metavar(action, action.dest.upper())
    return [f"{option} {value}" for option in action.option_strings]


def _metavar(action: argparse.Action, fallback: str) -> str:
    name = action.metavar if isinstance(action.metavar, str) else fallback
    nargs = action.nargs
    if nargs is None:
        return name
    if nargs == argparse.OPTIONAL:
        return f"[{name}]"
    if nargs == argparse.ZERO_OR_MORE:
        return f"[{name} ...]"
    if nargs == argparse.ONE_OR_MORE:
        return f"{name} [{name} ...]"
    if isinstance(nargs, int):
        return " ".join([name] * nargs)
    return f"{name} ..."


def _default(action: argparse.Action) -> str:
    """The default as a code span, or empty when there is none worth showing."""
    default = action.default
    if action.nargs == 0 or default is None or default == argparse.SUPPRESS:
        return ""
    if isinstance(default, list | tuple) and not default:
        return ""
    return f"`{default}`"


def _cell(text: str) -> str:
    """Text for a Markdown table cell or paragraph, its Markdown and HTML characters escaped."""
    parts = _CODE.split(text)
    for index in range(0, len(parts), 2):
        parts[index] = _SPECIAL.sub(lambda found: _ESCAPES[found.group()], parts[index])
    return "".join(parts)
