"""The provenance check (judge side): two calls of a case compared checkpoint by checkpoint.

The worker (grader/worker/provenance.py) calls each case once more, its inputs' elements in another order (the
twin), and records, for that call and for the graded call under the same config, every argument of each torch
operation, kernel launch and return that holds no data in flow (inputs, what kernels received, what torch computed
from those, what existed before the call). Such an argument must not depend on the input values: a constant table
is the same in both calls, a value computed from the inputs differs, and one that differs got there by a route
the grader does not follow (`str()`, a buffer, a file, ...). Numbers may differ in a few places (SCALARS_FREE: a call
counter), and in four more per value the task lets Python read (`python_reads`: a scale computed in Python from the
absmax is handed to a kernel as one or two numbers); tensors never.

Every field read here comes from the worker: a record of the wrong shape is a garbled result (ValueError), and no
text of it reaches a message but what has the form of a name (`name_of`).
"""

from __future__ import annotations

import re

SCALARS_PER_READ = 4
"""Numbers that may differ between the two calls, per value the task lets Python read."""
SCALARS_FREE = 4
"""Numbers that may differ between the two calls whatever the task: a call counter that a kernel's workspace keeps
(task 23's reference passes an `epoch`, one more each call), an address passed as an integer. Each carries at most
SCALAR_BITS, so four numbers carry at most 32 bytes of laundered data: docs/integrity.md, "What is still trusted"."""
SCALAR_BITS = 64
"""The most bits a number that differs between the two calls may hold: a Python int is unbounded (one handed to a
kernel as a `tl.constexpr` carried a case's 1,025 codes, about a kilobyte, as one differing number), a float or an
int64 holds 64. A complex number, a string or a wider int that differs fails the case."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PATH = re.compile(r"(#?[A-Za-z0-9_]{1,64})((\[[0-9]{1,4}\]|\.[A-Za-z0-9_]{1,64}){0,4})")


def name_of(value: object, fallback: str) -> str:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else fallback


def _path_of(value: object) -> str:
    return value if isinstance(value, str) and _PATH.fullmatch(value) else "an argument"


def _checkpoints(record: object) -> tuple[list, int]:
    if not isinstance(record, dict) or not isinstance(record.get("checkpoints"), list) \
            or type(record.get("overflow")) is not int:
        raise ValueError("the provenance record is in the wrong form")
    for cp in record["checkpoints"]:
        if not isinstance(cp, dict) or cp.get("at") not in ("op", "launch", "return") \
                or not isinstance(cp.get("name"), str) or not (cp.get("line") is None or type(cp["line"]) is int) \
                or not isinstance(cp.get("args"), list):
            raise ValueError("a provenance checkpoint is in the wrong form")
        for arg in cp["args"]:
            if not (isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str) and isinstance(arg[1], list)
                    and arg[1] and all(isinstance(x, (str, int, list)) for x in arg[1])):
                raise ValueError("a provenance argument is in the wrong form")
    return record["checkpoints"], record["overflow"]


def _where(cp: dict) -> str:
    line = f" at line {cp['line']}" if cp.get("line") is not None else ""
    if cp["at"] == "launch":
        return f"the launch of {name_of(cp['name'], 'a kernel')}{line}"
    if cp["at"] == "op":
        return f"torch.{name_of(cp['name'], 'operation')}{line}"
    return "the value the call returned"


def _tensor(note: list) -> bool:
    return bool(note) and note[0] == "t"


def bits(note: object) -> int | None:
    """The bits a noted non-tensor value holds (grader/worker/provenance.py `scalar`), or None when it is not a
    number of at most SCALAR_BITS (a wider int, a complex number, a string, a value noted in a form not known)."""
    if not isinstance(note, list) or len(note) != 2 or not isinstance(note[1], str):
        return None
    kind, text = note
    if kind == "b":
        return 1
    if kind == "f":
        return 64
    if kind == "i":  # an int, or a launch's grid ("4,1,1"): each number at most SCALAR_BITS
        widths = []
        for part in text.split(",")[:3]:
            if not (0 < len(part) <= 21 and re.fullmatch(r"-?[0-9]+", part)):  # (no int() of a long text)
                return None
            value = int(part)
            widths.append(value.bit_length() + (value < 0))
        return max(widths) if text.count(",") < 3 and max(widths) <= SCALAR_BITS else None
    return None


def compare(graded: object, twin: object, python_reads: int) -> str | None:
    """The problem the two records show, or None. `graded` is the record of the graded call, `twin` that of the
    call on the twin inputs (ValueError for a garbled one)."""
    a, _ = _checkpoints(graded)
    b, _ = _checkpoints(twin)
    n = min(len(a), len(b))
    differing: list[tuple[dict, str]] = []
    for k in range(n):
        x, y = a[k], b[k]
        if (x["at"], x["name"]) != (y["at"], y["name"]):
            return (f"with the same shapes and other input values the call did other work: {_where(x)} in one call, "
                    f"{_where(y)} in the other; what a call does may depend on the shapes, and on the input values "
                    "only through your kernels")
        xs, ys = dict((p, v) for p, v in x["args"]), dict((p, v) for p, v in y["args"])
        for path in dict.fromkeys([*xs, *ys]):
            u, v = xs.get(path), ys.get(path)
            if u == v or u is None or v is None:
                continue  # in flow in one call (a workspace kept from an earlier call): what enters it is noted
            if _tensor(u) or _tensor(v):
                return (f"{_path_of(path)} of {_where(x)} is a tensor whose values change with the input values, "
                        "but it was computed by no kernel and no torch operation on the inputs: input data reached "
                        "it another way (read into Python, through str(), a buffer or a file, and handed back); "
                        "everything computed from the inputs must go through your kernels")
            if bits(u) is None or bits(v) is None:
                return (f"{_path_of(path)} of {_where(x)} changes with the input values and holds more than a "
                        f"{SCALAR_BITS}-bit number (a long int, a string or a complex number): input data was read "
                        "into Python and handed back; everything computed from the inputs must go through your "
                        "kernels")
            differing.append((x, path))
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        return (f"with the same shapes and other input values the call did other work: one call went on to "
                f"{_where(longer[n])} and the other did not; what a call does may depend on the shapes, and on the "
                "input values only through your kernels")
    allowed = SCALARS_FREE + SCALARS_PER_READ * max(0, int(python_reads))
    if len(differing) > allowed:
        cp, path = differing[0]
        return (f"{len(differing)} number(s) handed to kernels or torch operations change with the input values "
                f"(the first: {_path_of(path)} of {_where(cp)}), where this task allows {allowed} (at most "
                f"{allowed * SCALAR_BITS // 8} bytes): input data was "
                "read into Python and handed back; everything computed from the inputs must go through your "
                "kernels")
    return None
