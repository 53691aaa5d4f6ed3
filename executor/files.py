"""Reading the files a user names (plans, edited responses): regular files only."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class NotARegularFile(OSError):
    """The path names a device, pipe, socket or directory, which is not read."""


def read_regular_file(path: str | Path) -> bytes:
    """The bytes of the regular file at `path`.

    A device (`/dev/zero` reads forever), a pipe (blocks until a writer comes), a socket or a
    directory raises NotARegularFile, its `strerror` saying which; other failures are OSError.
    The file is opened without blocking and checked on its open descriptor, so a path swapped
    for a pipe after a check is still refused.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = ("is a directory" if stat.S_ISDIR(mode)
                    else "not a regular file (a device, pipe or socket)")  # fmt: skip
            raise NotARegularFile(0, kind, str(path))
        with os.fdopen(descriptor, "rb", closefd=True) as file:
            descriptor = -1
            return file.read()
    finally:
        if descriptor >= 0:
            os.close(descriptor)
