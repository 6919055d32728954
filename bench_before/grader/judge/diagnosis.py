"""A diagnosis across cases: when some public cases fail and others pass, one line that names the case parameter
separating them, learned from the task's own case table (task.yaml), so a student with seven failing cases does
not have to find the pattern alone: `the failing public cases are exactly those where IN is not a multiple of 64
(5 failing, 7 passing)`.

Only public cases are read (a hidden case's parameters are not for students), only one parameter at a time, and
only a rule that splits the cases exactly; with fewer than two failing or two passing cases, or no exact rule,
there is no diagnosis. Rules, in the order tried (the first kind that splits wins, and within a kind the most
telling): a value (`dtype is float16`), divisibility by a power of two (the largest that splits: block sizes are
powers of two), a threshold (`n >= 65537`), a power of two itself. Parameters that differ in every case without
meaning (`seed`) are left out.
"""

from __future__ import annotations

from collections.abc import Callable

IGNORED = frozenset({"seed"})
"""Case parameters that never explain anything: they differ by construction."""

MIN_EACH = 2
"""Failing and passing cases needed on each side: one failing case is separated by any of its own values."""

Rule = tuple[str, Callable[[object], bool]]


def _rules(key: str, values: list) -> list[list[Rule]]:
    """The candidate rules over one parameter, by kind, each as (wording, predicate)."""
    distinct = sorted(set(values), key=repr)
    kinds: list[list[Rule]] = [[], [], [], []]
    if len(distinct) < 2:
        return kinds
    if all(isinstance(v, (str, bool)) for v in values) or len(distinct) <= 3:
        shown = {u: str(u).lower() if isinstance(u, bool) else u for u in distinct}  # YAML's true / false
        kinds[0] += [(f"{key} is {shown[u]}", lambda v, u=u: v == u) for u in distinct]
        kinds[0] += [(f"{key} is not {shown[u]}", lambda v, u=u: v != u) for u in distinct]
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(ints) == len(values):
        for d in (1 << k for k in range(12, 0, -1)):  # 4096 down to 2: the largest that splits comes first
            kinds[1].append((f"{key} is not a multiple of {d}", lambda v, d=d: v % d != 0))
        for t in sorted(set(ints))[1:]:
            kinds[2].append((f"{key} >= {t}", lambda v, t=t: v >= t))
            kinds[2].append((f"{key} < {t}", lambda v, t=t: v < t))
        kinds[3].append((f"{key} is not a power of two", lambda v: v <= 0 or v & (v - 1) != 0))
    return kinds


def diagnose(cases: list[tuple[dict, bool]]) -> str | None:
    """`cases`: (the case's parameters, whether it passed) for each public case. The line, or None."""
    failing = sum(1 for _, ok in cases if not ok)
    passing = len(cases) - failing
    if failing < MIN_EACH or passing < MIN_EACH:
        return None
    keys = sorted(set.intersection(*(set(p) for p, _ in cases)) - IGNORED)
    by_kind: list[list[str]] = [[], [], [], []]
    for key in keys:
        values = [p[key] for p, _ in cases]
        if any(isinstance(v, (list, dict, tuple)) or v is None for v in values):
            continue
        for kind, rules in enumerate(_rules(key, values)):
            for words, holds in rules:
                try:
                    if all(holds(p[key]) == (not ok) for p, ok in cases):
                        by_kind[kind].append(words)
                        break  # the first (most telling) rule of this kind for this parameter
                except TypeError:
                    break
    found = next((k for k in by_kind if k), None)
    if not found:
        return None
    return (f"the failing public cases are exactly those where {found[0]} ({failing} failing, {passing} "
            f"passing)")
