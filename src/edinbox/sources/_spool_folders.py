"""A spool's folders, each opened once and never through a symbolic link; every file operation goes through them.

The root may be a link the operator chose (`dir:///srv/edi` where /srv/edi links elsewhere): it is opened as given.
Its subfolders (`inbound/`, `processing/`, ...) are opened relative to it with `O_DIRECTORY | O_NOFOLLOW`, and the
spool then works relative to those descriptors (`dir_fd=`), so a subfolder swapped for a symlink is never followed:
one found at open is a ConfigurationError naming it. While the spool runs, `refresh` (once per listing) checks that
each name still leads to the folder pinned: a folder swapped for a symlink (or another kind of file) stops the
source with a ConfigurationError; one removed is a SourceError (an outage, waited out); one replaced by another real
folder is opened again. Between two checks the pinned folders are used, so nothing is ever written or read through
the swapped name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from edinbox._errors import ConfigurationError, SourceError

__all__ = ["DIR_FLAGS", "Folders", "check_folders", "folder_problem", "open_folder"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
"""How a subfolder is opened: a folder, never a link."""
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


def folder_problem(mode: int) -> str:
    """Why an entry of this `st_mode` cannot be a spool folder; empty for a directory."""
    if stat.S_ISDIR(mode):
        return ""
    if stat.S_ISLNK(mode):
        return "is a symbolic link (the spool follows none: make it a real folder)"
    return "is not a folder"


def _refused(where: str, problem: str) -> ConfigurationError:
    return ConfigurationError(f"the spool folder {where} {problem}")


def open_folder(parent: int, name: str, *, where: str, create: bool = False) -> int:
    """Open the subfolder `name` of the folder open as `parent` without following a link (created first with
    `create`); ConfigurationError when it is a link or not a folder, SourceError when it cannot be opened."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent)
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            try:
                problem = folder_problem(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
            except OSError:
                problem = ""
            raise _refused(where, problem or "is not a folder") from exc
        raise SourceError(f"cannot open the spool folder {where}: {exc.strerror or exc}") from exc


def _open_root(root: Path, *, create: bool) -> int:
    try:
        if create:
            root.mkdir(parents=True, exist_ok=True)
        return os.open(root, _ROOT_FLAGS)
    except NotADirectoryError as exc:
        raise _refused(str(root), "is not a folder") from exc
    except OSError as exc:
        raise SourceError(f"cannot open the spool folder {root}: {exc.strerror or exc}") from exc


def check_folders(root: Path, names: Sequence[str]) -> None:
    """Refuse, without creating or changing anything, a spool whose subfolders `names` (those that exist) include a
    symbolic link or something else than a folder (what `edinbox doctor` reports)."""
    fd = _open_root(root, create=False)
    try:
        for name in names:
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                continue
            if problem := folder_problem(mode):
                raise _refused(str(root / name), problem)
    finally:
        os.close(fd)


class Folders:
    """The open descriptors of a spool's root and its subfolders `names` (by name: `folders["inbound"]`)."""

    def __init__(self, root: Path, names: Sequence[str], *, create: bool) -> None:
        """Open `root` (created with `create`, as every subfolder) and each of `names` in it, never through a link."""
        self.root = root
        self._fds: dict[str, int] = {}
        self._pinned: dict[str, tuple[int, int]] = {}
        self.fd = _open_root(root, create=create)
        try:
            for name in names:
                self._pin(name, create=create)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> int:
        """The descriptor of the subfolder `name`."""
        return self._fds[name]

    def where(self, name: str) -> str:
        """The subfolder `name` as a path, for messages."""
        return str(self.root / name)

    def _pin(self, name: str, *, create: bool) -> None:
        fd = open_folder(self.fd, name, where=self.where(name), create=create)
        info = os.fstat(fd)
        old = self._fds.get(name)
        self._fds[name] = fd
        self._pinned[name] = (info.st_dev, info.st_ino)
        if old is not None:
            os.close(old)

    def refresh(self, names: Sequence[str]) -> None:
        """Check that each of `names` still leads to the folder pinned: see the module's docstring."""
        for name in names:
            try:
                info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
            except FileNotFoundError as exc:
                # gone too (the spool moved, its volume unmounted): an outage, not an empty spool
                raise SourceError(f"cannot list {self.where(name)}: it is gone") from exc
            except OSError as exc:
                raise SourceError(f"cannot look at {self.where(name)}: {exc.strerror or exc}") from exc
            if problem := folder_problem(info.st_mode):
                raise _refused(self.where(name), f"{problem}; it was a folder when the spool opened")
            if (info.st_dev, info.st_ino) != self._pinned[name]:
                self._pin(name, create=False)

    def close(self) -> None:
        """Close every descriptor."""
        for fd in [*self._fds.values(), self.fd]:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fds.clear()
        self.fd = -1
