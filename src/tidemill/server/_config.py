"""`ServerConfig`: what a server serves, and how."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidemill.engine import ModelResolver
from tidemill.engine.workers._retention import check_keep
from tidemill.errors import InvalidOption
from tidemill.workspace import DEFAULT_WORKSPACE

__all__ = ["ServerConfig"]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """A server's settings.

    Args:
        db: The store's URL (`sqlite:///...` or `postgresql://...`); None:
            the embedded default, `.tidemill/tidemill.db`.
        workspace: The workspace it serves.
        worker: Run a worker in the server's process (the default); False
            when `tidemill worker` processes execute the runs.
        concurrency: The in-process worker's concurrent jobs.
        lease: Seconds the in-process worker's claim on a step lasts unless
            renewed: after a crash, another worker (or this server, restarted)
            takes the step over once it runs out.
        keep_runs: Seconds the in-process worker keeps an ended run: every
            minute it deletes older ones (`Worker(keep_runs=...)`); None (the
            default) keeps every run. Needs `worker`.
        secure_cookies: Mark the session cookie `Secure` (for a server behind HTTPS).
        sign_in_attempts: Failed sign-ins allowed per user and address in `sign_in_window` s.
        sign_in_window: The window of `sign_in_attempts`, in seconds.
        migrate: Bring the store's schema up to date on start (None: for SQLite only).
        ui: Serve the web UI at the root (`/`, `/runs`, ...); False: the API only.
        ui_dir: The UI's built bundle to serve (None: the one in the package,
            which `make ui` builds in a checkout).
        models: Builds the in-process worker's models (`ModelChoice` in, `Model`
            out), for a server embedded in a program; None: from each brain's
            settings, as `tidemill worker` does.
        copilot_model: The model spec of the copilot's chat API
            (`/api/copilot/...`), unless a request names one; None: each
            request must name one.
    """

    db: str | None = None
    workspace: str = DEFAULT_WORKSPACE
    worker: bool = True
    concurrency: int = 4
    lease: float = 30.0
    keep_runs: float | None = None
    secure_cookies: bool = False
    sign_in_attempts: int = 5
    sign_in_window: float = 300.0
    migrate: bool | None = None
    ui: bool = True
    ui_dir: Path | None = None
    models: ModelResolver | None = None
    copilot_model: str | None = None

    def __post_init__(self) -> None:
        if self.keep_runs is None:
            return
        check_keep(self.keep_runs, "keep_runs")
        if not self.worker:
            raise InvalidOption(
                "keep_runs prunes runs from the server's worker, and worker=False runs none.",
                hint="Prune from the workers that execute the runs (Worker(keep_runs=...), "
                "`tidemill worker --keep-runs 30d`), or leave worker on.",
            )
