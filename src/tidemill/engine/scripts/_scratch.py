"""The capture directories of script processes: one per child, swept when left behind.

Each child writes what it prints to files in a directory of its own in the
temporary directory, named `tidemill-script-<pid>-...` after the process of
the pool that made it. The child removes it when its pool's pipe closes;
when both die at once (a worker killed with its process group), it stays.
A pool sweeps, when it starts, the directories of pools whose process is
gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["PREFIX", "make_directory", "sweep_directories"]

PREFIX = "tidemill-script-"


def make_directory() -> str:
    """A new capture directory, named after this process."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_directories(root: str | None = None) -> int:
    """Remove the capture directories whose pool's process is gone; return how many.

    Examples:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> _ = os.mkdir(os.path.join(root, f"{PREFIX}{2**22 + 1}-x"))  # no such process
        >>> _ = os.mkdir(os.path.join(root, f"{PREFIX}{os.getpid()}-y"))  # this one's
        >>> sweep_directories(root), sorted(os.listdir(root))
        (1, ['tidemill-script-...-y'])
    """
    swept = 0
    for path in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        pid, sep, _ = path.name[len(PREFIX) :].partition("-")
        if path.is_symlink() or not path.is_dir():
            continue
        if sep and pid.isdigit():
            if _alive(int(pid)):
                continue
        else:  # named before pools put their pid in it: remove it only when empty
            with contextlib.suppress(OSError):
                path.rmdir()
                swept += 1
            continue
        shutil.rmtree(path, ignore_errors=True)
        swept += 1
    return swept
