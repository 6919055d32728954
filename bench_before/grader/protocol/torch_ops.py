"""The op audit (judge side): which torch work a task's wrapper may do, and the check of a call's record.

A task declares in task.yaml what torch work its wrapper may do, as groups and op names:

    torch_ops: [alloc, view, cast, scalar, meta, abs, max, amax]

Left out, a task gets DEFAULT_ALLOW. Any other operation the submission ran (grader/worker/op_audit.py records them,
with the line of the submission that asked) counts against the call: when the elements such operations produced add up
to the size of the smallest output the kernel must write, the call fails, naming the largest of them (`torch.round on
4194304 elements at line 23: q must come from your kernel`). Summing catches a computation split into slices as well as
a whole one; a few elements of other work (a grid size computed with a tensor) stay below the line. """

from __future__ import annotations

GROUPS: dict[str, frozenset[str]] = {
    "alloc": frozenset({
        "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
        "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero",
        "zero_", "scalar_tensor", "resize_"}),
    "view": frozenset({
        "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "t", "transpose", "permute", "expand",
        "squeeze", "unsqueeze", "select", "slice", "alias", "detach", "unbind", "split", "split_with_sizes",
        "chunk", "narrow", "flatten", "unflatten", "view_as", "expand_as", "diagonal", "movedim", "unfold",
        "view_as_real", "view_as_complex"}),
    "cast": frozenset({"_to_copy", "to", "type_as", "_to_dense"}),
    "copy": frozenset({"clone", "copy_", "contiguous", "_copy_from", "_copy_from_and_resize"}),
    "meta": frozenset({"sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "size",
                       "stride", "numel", "dim", "is_contiguous", "is_nonzero", "record_stream"}),
}
"""Op groups a task may allow by name. alloc: making buffers (and filling them with a constant); view: new
shapes and strides over the same data; cast: dtype and device conversions; copy: layout copies (`contiguous`);
meta: questions about a tensor. "scalar" is not a list: it allows any operation on tensors of at most one
element that holds no input data (`1.0 / absmax`)."""

SPECIAL = ("scalar",)
DEFAULT_ALLOW: tuple[str, ...] = ("alloc", "view", "cast", "copy", "meta", "scalar")
"""What a wrapper may do when its task.yaml says nothing: allocate, reshape, cast, copy to a layout, and
scalar arithmetic. Everything the task computes must then come from a Triton kernel."""


def expand(allow: list[str] | tuple[str, ...]) -> tuple[frozenset[str], bool]:
    """The op names a policy allows, and whether scalar arithmetic is allowed."""
    names: set[str] = set()
    for item in allow:
        names |= GROUPS.get(item, {item})
    return frozenset(names), "scalar" in allow


TO_PYTHON = ("tolist", "numpy", "iter")
READS = ("item", *TO_PYTHON)
"""Operations that hand tensor data to Python. Of input data or of values computed from it (the record's
`reads_input`, grader/worker/op_audit.py), they count against the task's `python_reads` budget, allowed op or not:
Python can compute with what it reads and hand the results to a kernel that only stores them, a value at a time, below
any threshold of whole outputs (tasks/10_quantize_global_int8/wrong/slice_max_launder.py)."""


def describe(rec: dict) -> str:
    """One record as students read it: `torch.round on 4194304 element(s) at line 23`."""
    op = rec["op"]
    what = f"data handed to Python with .{op}()" if op in TO_PYTHON else \
        "a tensor's value read into Python (.item(), float(t), int(t), bool(t))" if op == "item" else f"torch.{op}"
    when = ", while the file was imported" if rec.get("phase") == "import" else ""
    return f"{what} on {rec['elements']} element(s) at line {rec.get('line')}{when}"


def check(records: list, allow: list[str] | tuple[str, ...], threshold: int, output: str,
          python_reads: int = 0) -> str | None:
    """The problem with a call's torch work, or None. `records` come from the worker (untrusted: a record in the
    wrong form is a garbled result, ValueError); `threshold` is the element count of the smallest output the
    kernel must write, `output` its name; `python_reads` the elements of input data the call may hand to Python
    (task.yaml; READS)."""
    if not isinstance(records, list):
        raise ValueError("the op audit's record is not a list")
    names, scalar_ok = expand(allow)
    counted, total = [], 0
    for rec in records:
        if not isinstance(rec, dict) or not isinstance(rec.get("op"), str) \
                or type(rec.get("elements")) is not int or rec["elements"] < 0:
            raise ValueError("the op audit's record is in the wrong form")
        if rec["op"] in names or (scalar_ok and rec.get("scalar") is True) or rec.get("constant") is True:
            continue  # allowed, scalar arithmetic, or a constant table built from literals and shapes
        counted.append(rec)
        total += rec["elements"]
    reads = [r for r in records if r["op"] in READS and r.get("reads_input") is True]
    read = sum(r["elements"] for r in reads)
    if (not counted or total < max(1, threshold)) and read > python_reads:
        worst = max(reads, key=lambda r: r["elements"])
        return (f"{describe(worst)}: {read} element(s) of input data, or of values computed from it, handed to "
                f"Python in this call, where this task allows {python_reads}: {output} must come from your kernel, "
                "and what Python reads of the inputs does not reach it through the kernel's arguments either")
    if not counted or total < max(1, threshold):
        return None
    worst = max(counted, key=lambda r: r["elements"])
    more = len(counted) - 1
    rest = f" (and {more} other torch operation(s), {total} elements in all)" if more else ""
    return (f"{describe(worst)}{rest}: {output} must come from your kernel; this task's wrapper may use torch "
            f"only for {', '.join(allow)}")
