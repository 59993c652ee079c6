"""MkDocs hooks of the docs site, registered under `hooks:` in `mkdocs.yml`.

`cli.md` holds an intro and `tidemill.cli._reference.MARKER`; at build time
the marker is replaced with the reference rendered from the real parser, so
the page always matches `tidemill --help`.
"""

from __future__ import annotations

from typing import Any

CLI_PAGE = "cli.md"
"""The page that holds the marker."""


def on_page_markdown(markdown: str, *, page: Any, **_: Any) -> str:
    """Fill the CLI reference into `cli.md`; leave every other page as it is.

    Raises:
        ValueError: `cli.md` lost its marker (the reference would be missing).
    """
    from tidemill.cli._reference import MARKER, substitute

    if page.file.src_uri == CLI_PAGE or MARKER in markdown:
        return substitute(markdown)
    return markdown
