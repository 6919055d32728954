"""Tokens for the submission server: `python -m grader tokens ROSTER.csv --out TOKENS.csv`.

ROSTER.csv has a `student` column (other columns are ignored). TOKENS.csv gets `student,token,role`: one random,
URL-safe token per student (role `student`) and one per `--staff NAME` (role `staff`: the queue, the gradebook).
The TA hands each student their line. The server (grader/server/service.py) reads TOKENS.csv when it starts and
keeps only each token's SHA-256: neither its database nor its logs hold a token.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import secrets
from dataclasses import dataclass
from pathlib import Path

from grader.gates.intake import student_id

ROLES = ("student", "staff")


class TokenError(ValueError):
    """A roster or tokens file that cannot be used, with the file and line."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def read_roster(path: Path) -> list[str]:
    """The roster's student names, in its order, each once. A name must be printable (it becomes a folder of the
    server's results and a gradebook row): one that is not, or a missing `student` column, raises TokenError."""
    text = path.read_text(encoding="utf-8-sig")
    rows = csv.DictReader(io.StringIO(text))
    if "student" not in (rows.fieldnames or []):
        raise TokenError(f"{path}: no `student` column (the first line names the columns)")
    names: list[str] = []
    for line, row in enumerate(rows, 2):
        name = (row.get("student") or "").strip()
        if not name:
            continue
        if student_id(name) != name or "/" in name or name in (".", ".."):
            raise TokenError(f"{path}:{line}: the student name {ascii(name)} is not a plain printable name")
        if name not in names:
            names.append(name)
    return names


def new_token() -> str:
    """A random URL-safe token (24 bytes) that does not start with "-": on a command line (`--token TOKEN`), one
    that does reads as an option."""
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


def make_tokens(roster: Path, out: Path, staff: list[str] | None = None) -> int:
    """Write `out` (student,token,role) for every roster student and `staff` name; returns how many. A student
    already in `out` keeps their token, so adding a late student to the roster does not change anyone else's."""
    kept = {(r.name, r.role): r.token for r in read_tokens(out)} if out.is_file() else {}
    people = [(name, "student") for name in read_roster(roster)] + [(name, "staff") for name in staff or []]
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "token", "role"])
    for name, role in people:
        w.writerow([name, kept.get((name, role)) or new_token(), role])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(buf.getvalue())
    out.chmod(0o600)  # the tokens are passwords
    return len(people)


@dataclass(frozen=True)
class Holder:
    name: str
    token: str
    role: str


def read_tokens(path: Path) -> list[Holder]:
    rows = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
    if not {"student", "token"} <= set(rows.fieldnames or []):
        raise TokenError(f"{path}: the columns must be student,token[,role]")
    found = []
    for line, row in enumerate(rows, 2):
        name, token, role = (row.get("student") or "").strip(), (row.get("token") or "").strip(), \
            (row.get("role") or "student").strip()
        if not name or not token:
            continue
        if role not in ROLES:
            raise TokenError(f"{path}:{line}: role {role!r} is none of {', '.join(ROLES)}")
        if len(token) < 16:
            raise TokenError(f"{path}:{line}: a token of {len(token)} characters is too short to be a secret")
        if student_id(name) != name or "/" in name or name in (".", ".."):
            raise TokenError(f"{path}:{line}: the name {ascii(name)} is not a plain printable name")
        found.append(Holder(name, token, role))
    return found


class TokenBook:
    """Who a bearer token is: the hashes of TOKENS.csv, compared in constant time."""

    def __init__(self, holders: list[Holder]) -> None:
        self._by_hash = {token_hash(h.token): (h.name, h.role) for h in holders}

    @classmethod
    def from_file(cls, path: Path) -> TokenBook:
        return cls(read_tokens(path))

    def who(self, token: str | None) -> tuple[str, str] | None:
        """(name, role) of `token`, or None."""
        if not token:
            return None
        digest = token_hash(token)
        for known, holder in self._by_hash.items():
            if hmac.compare_digest(known, digest):
                return holder
        return None

    @property
    def students(self) -> list[str]:
        return sorted(name for name, role in self._by_hash.values() if role == "student")

    @property
    def staff(self) -> list[str]:
        return sorted(name for name, role in self._by_hash.values() if role == "staff")
