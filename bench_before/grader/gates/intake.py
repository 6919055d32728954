"""Intake: reading what a student handed in, as hostile bytes (issue "Hostile input, everywhere a student's bytes go").

Every byte a student controls (file contents, file and folder names, notebooks, what an unpacked zip holds) is
hostile, and one student's input fails that student only. This module is the one way the trusted side reads a
submitted file or lists a submitted folder:

* no link is followed: `read_submitted` opens every component below the trusted base (the class's folder, or
  Gradescope's `submission/`) with O_NOFOLLOW, relative to the folder opened before it (`dir_fd`), so a symbolic
  link, as the file or as any folder above it, is refused, and there is no window between a check and the read
  (the descriptor checked is the one read). `git clone` and `unzip` keep links; a link to the grader's
  `tasks/<task>/solution.py` used to earn full marks;
* only regular files, and bounded: a FIFO or a device is refused (O_NONBLOCK, so opening one cannot hang), a file
  over MAX_SOURCE_BYTES (MAX_NOTEBOOK_BYTES for a notebook) is refused without being read whole;
* `scan` lists a folder without following links, to a bounded depth and number of entries (what Gradescope
  unpacks from a zip can hold anything: links, thousands of files, odd names), and says what it left out;
* names are data: `student_id` turns a folder name that is not printable UTF-8 (a newline, a terminal escape,
  bytes that are not UTF-8) into a printable id, used for every path and report the grader writes, and `shown`
  quotes a name for a message.

Errors: IntakeError (a ValueError) with a message for the student, e.g. "10_quantize_global_int8.py is a symbolic
link: submissions are graded only as regular files in your folder".
"""

from __future__ import annotations

import difflib
import errno
import os
import stat
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

MAX_SOURCE_BYTES = 1 << 20
"""A `.py` larger than this (1 MiB) is refused: a homework's kernels are a few KB, and the static check, the
similarity tokenizer and the worker all read the whole file."""
MAX_NOTEBOOK_BYTES = 32 << 20
"""A notebook larger than this (32 MiB) is refused: outputs (plots) make notebooks large, but not larger."""
MAX_ENTRIES = 2000
"""`scan` looks at no more entries than this (files and folders): an upload of more is reported, not walked."""
MAX_DEPTH = 12
"""`scan` goes no deeper than this many folders below its base."""

LINK_MESSAGE = "is a symbolic link: submissions are graded only as regular files in your folder"


class IntakeError(ValueError):
    """A submitted path the grader refuses to read; the message is for the student."""


def shown(name: str | os.PathLike) -> str:
    """A name as a message may show it: as it is when it is printable UTF-8, else quoted as Python writes it
    (`'a\\nb'`, `'\\x1b]0;'`, `'\\udcff'` for a byte that is not UTF-8), so that a name cannot end a line, move a
    terminal's cursor or break a report's encoding."""
    text = os.fspath(name)
    return text if _printable(text) else ascii(text)


def _printable(text: str) -> bool:
    if not text:
        return False
    try:
        text.encode("utf-8")  # a surrogate (a byte of the name that is not UTF-8) fails here
    except UnicodeEncodeError:
        return False
    return all(unicodedata.category(c)[0] != "C" for c in text)


def student_id(folder_name: str) -> str:
    """The id a student folder is graded under: its name when that is printable UTF-8, else its `ascii()` quoting
    without the quotes (`a\\nb`): no newline, escape or undecodable byte reaches a path, a CSV row or a terminal,
    and the id is still unique to the folder."""
    return folder_name if _printable(folder_name) else ascii(folder_name)[1:-1]


def _open_below(base: Path, rel: Path, final_flags: int) -> int:
    """A descriptor of `base / rel`, every component of `rel` opened with O_NOFOLLOW relative to the one before."""
    parts = rel.parts
    if not parts or rel.is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise IntakeError(f"{shown(rel)}: not a path inside your folder")
    cloexec = getattr(os, "O_CLOEXEC", 0)
    try:  # the student's folder itself must not be a link either (its parents are the trusted side's)
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | cloexec)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(base):
            raise IntakeError(f"your folder {shown(base.name)} {LINK_MESSAGE}") from None
        raise IntakeError(f"{shown(base.name)} cannot be read ({exc.strerror or exc})") from None
    try:
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            flags = (final_flags if last else os.O_RDONLY | os.O_DIRECTORY) | os.O_NOFOLLOW | cloexec
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                where = Path(*parts[: k + 1])
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and os.path.islink(base / where)):
                    raise IntakeError(f"{shown(where)} {LINK_MESSAGE}") from None
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    raise IntakeError(f"{shown(where)}: no such file") from None
                raise IntakeError(f"{shown(where)} cannot be read ({exc.strerror or exc})") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_submitted(base: Path, rel: str | Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file `base / rel`, where `base` is trusted (the class's folder, Gradescope's
    submission folder) and `rel` is the student's: a link anywhere in `rel`, a file that is not regular, or one
    over `limit` bytes (default: MAX_NOTEBOOK_BYTES for `.ipynb`, MAX_SOURCE_BYTES otherwise) raises
    IntakeError. The checks are made on the descriptor that is read."""
    rel = Path(rel)
    if limit is None:
        limit = MAX_NOTEBOOK_BYTES if rel.suffix.lower() == ".ipynb" else MAX_SOURCE_BYTES
    fd = _open_below(base, rel, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without waiting for a writer
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IntakeError(f"{shown(rel)} is not a regular file: submissions are graded only as regular files")
        if st.st_size > limit:
            raise IntakeError(f"{shown(rel)} is {st.st_size} bytes, over the grader's limit of {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while being read
            raise IntakeError(f"{shown(rel)} is over the grader's limit of {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise IntakeError(f"{shown(rel)} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def is_link_or_outside(base: Path, path: Path) -> str | None:
    """Why the trusted side must not read `path` as a submission below `base` (a link in it, or a path that
    resolves outside `base`), or None. For listings; reads go through `read_submitted`, which checks again."""
    try:
        rel = path.relative_to(base)
    except ValueError:
        return f"{shown(path)}: outside your folder"
    for k in range(1, len(rel.parts) + 1):
        if (base / Path(*rel.parts[:k])).is_symlink():
            return f"{shown(Path(*rel.parts[:k]))} {LINK_MESSAGE}"
    if not path.resolve().is_relative_to(base.resolve()):
        return f"{shown(rel)}: outside your folder"
    return None


@dataclass
class Scan:
    """What `scan` found below a folder: regular files (paths relative to it), and what it did not list."""

    files: list[Path] = field(default_factory=list)
    """Entries that are neither folders nor links: regular files, and any FIFO or device (refused when read)."""
    links: list[Path] = field(default_factory=list)
    """Symbolic links met (files or folders): never followed, never graded."""
    notes: list[str] = field(default_factory=list)
    """What was left out and why (too many entries, too deep), for the student's result."""


def scan(folder: Path, deep: bool = False, hidden: bool = False) -> Scan:
    """The regular files in `folder` (and, `deep`, below it), no link followed, names starting with '.' skipped
    unless `hidden`, at most MAX_ENTRIES entries and MAX_DEPTH folders down. Sorted by depth, then name."""
    found = Scan()
    seen = 0
    stack: list[tuple[Path, int]] = [(Path(), 0)]
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(folder / rel) as entries:
                items = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            found.notes.append(f"{shown(rel)}: cannot be listed ({exc.strerror or exc})")
            continue
        for entry in items:
            if not hidden and entry.name.startswith("."):
                continue
            seen += 1
            if seen > MAX_ENTRIES:
                found.notes.append(f"more than {MAX_ENTRIES} files and folders: the rest were not looked at")
                stack.clear()
                break
            path = rel / entry.name
            try:
                if entry.is_symlink():
                    found.links.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    if not deep:
                        continue
                    if depth + 1 > MAX_DEPTH:
                        found.notes.append(f"{shown(path)}: more than {MAX_DEPTH} folders deep, not looked at")
                    else:
                        stack.append((path, depth + 1))
                else:  # a FIFO or a device too: listed, and refused when read (`read_submitted`), not skipped
                    found.files.append(path)
            except OSError:
                continue
    found.files.sort(key=lambda p: (len(p.parts), str(p)))
    found.links.sort(key=lambda p: (len(p.parts), str(p)))
    return found


ARCHIVES = (".zip", ".tar", ".tgz", ".gz", ".bz2", ".xz", ".7z", ".rar")
"""What a student may hand in packed: never unpacked by the grader (a zip bomb, links inside), said instead."""


@dataclass
class TaskFiles:
    """What `task_files` decided for one folder: the file graded for each task, and, for the TA and the student,
    every file it did not grade and why (one line each; names quoted by `shown`, so plain text)."""

    files: dict[str, Path] = field(default_factory=dict)
    """task id -> the `<task_id>.py` graded for it (relative to the folder; it may be a link, refused when read)."""
    notes: list[str] = field(default_factory=list)
    empty: bool = False
    """The folder holds no file at all."""


def task_files(folder: Path, task_ids: list[str], deep: bool = True) -> TaskFiles:
    """The rule every way of grading a folder shares (batch, grade-dir, Gradescope's run): a task's file is the
    `<task_id>.py` nearest the top of the folder (`deep`: at any depth, as an unpacked zip nests it; then by
    name); every other file is said, never ignored in silence: another file of the same name, a `.py` named like
    no task (with the task it looks like: `10_x (1).py`, a browser's re-upload, is not `10_x.py`), an archive
    (never unpacked), a link, and anything else but a notebook (the notebook reader says what it does with those).
    Nothing is followed or read here: `scan` lists, and `read_submitted` reads."""
    listed = scan(folder, deep=deep)
    out = TaskFiles(notes=list(listed.notes), empty=not listed.files and not listed.links)
    python = [rel for rel in [*listed.files, *listed.links]
              if rel.suffix == ".py" and not any(part.startswith("__") for part in rel.parts)]
    python.sort(key=lambda p: (len(p.parts), str(p)))
    for rel in python:
        if rel.stem in task_ids and rel.stem not in out.files:
            out.files[rel.stem] = rel
    for rel in python:
        if out.files.get(rel.stem) == rel:
            continue
        if rel.stem in task_ids:
            out.notes.append(f"{shown(rel)}: not graded, {shown(out.files[rel.stem])} is graded for {rel.stem} "
                             "(of two files with a task's name, the one nearest the top of the folder)")
            continue
        guess = difflib.get_close_matches(rel.stem, task_ids, n=1, cutoff=0.5)
        if guess and guess[0] in out.files:
            hint = f"; {shown(out.files[guess[0]])} is the file graded for {guess[0]}"
        elif guess:
            hint = f"; did you mean {guess[0]}.py? Only a file named exactly after its task is graded"
        else:
            hint = f"; the tasks are {', '.join(task_ids)}"
        out.notes.append(f"{shown(rel)}: not graded, no task is named {shown(rel.stem)}{hint}")
    listed_py = set(python)
    for rel in listed.links:
        if rel not in listed_py and rel.suffix.lower() != ".ipynb":
            out.notes.append(f"{shown(rel)} {LINK_MESSAGE}: not graded")
    other = [rel for rel in listed.files if rel not in listed_py and rel.suffix.lower() != ".ipynb"
             and not any(part.startswith("__") for part in rel.parts)]
    for rel in other:
        if rel.name.lower().endswith(ARCHIVES):
            out.notes.append(f"{shown(rel)}: not graded, an archive is never unpacked: hand in the files themselves")
    stray = [rel for rel in other if not rel.name.lower().endswith(ARCHIVES)]
    if stray:
        names = ", ".join(shown(rel) for rel in stray[:10]) + (f" and {len(stray) - 10} more" if len(stray) > 10
                                                                else "")
        out.notes.append(f"not graded, not a task's .py nor a notebook: {names}")
    return out
