"""Opening and creating the files of the trusted tree: never through a link, only regular files, and a new file
never over one that exists (nothing planted there is used)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def open_trusted(path: Path, flags: int = os.O_RDONLY) -> int:
    """Open a file of the trusted tree for reading: never through a link, and only a regular file."""
    fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    return fd


def create_trusted(path: Path) -> int:
    """Create a file of the trusted tree for appending: it must not exist (no link, nothing planted)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND
                   | getattr(os, "O_CLOEXEC", 0), 0o600)
