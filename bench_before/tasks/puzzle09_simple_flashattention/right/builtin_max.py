"""Puzzle 9, right: Python's `max` of two tensors for the running maximum, and tl.exp.

Inside a kernel, Triton's compiler reads `max(a, b)` of tensors as `tl.maximum(a, b)` (with a deprecation
warning); a public solution writes its running maximum this way (zzhbrr/Triton-Puzzles, puzzle 9, seen when
grading public solutions for the fair-verdicts issue). Triton's interpreter used to run it as Python's max, which
returns one of the two whole tensors (here always `best`, which then never leaves its start: NaN everywhere),
so the same file passed on a GPU and failed on the CPU; the grader's interpreter now reads it as the compiler
does (grader/worker/interpreter.py patch_interpreter_minmax). The public file's order, `max(best, ...)`, happened to
survive: Python's max then always picks the chunk's own maximum, and an online softmax tolerates any consistent
shift while no exp overflows."""

import triton
import triton.language as tl

KEYS = tl.constexpr(64)  # keys per step


@triton.jit
def flashatt_kernel(q_ptr, k_ptr, v_ptr, z_ptr, N0, T, B0: tl.constexpr):
    offs = tl.program_id(0) * B0 + tl.arange(0, B0)
    q = tl.load(q_ptr + offs, mask=offs < N0, other=0.0)
    best = tl.full([B0], -1.0e30, dtype=tl.float32)  # a finite start: exp(start - best) is 0, never NaN
    total = tl.zeros([B0], dtype=tl.float32)
    acc = tl.zeros([B0], dtype=tl.float32)
    for j in range(0, T, KEYS):
        keys = j + tl.arange(0, KEYS)
        ok = keys < T
        k = tl.load(k_ptr + keys, mask=ok, other=0.0)
        v = tl.load(v_ptr + keys, mask=ok, other=0.0)
        scores = tl.where(ok[None, :], q[:, None] * k[None, :], -1.0e30)
        new_best = max(tl.max(scores, axis=1), best)  # elementwise, as the compiler reads it
        shrink = tl.exp(best - new_best)
        weights = tl.where(ok[None, :], tl.exp(scores - new_best[:, None]), 0.0)
        total = total * shrink + tl.sum(weights, axis=1)
        acc = acc * shrink + tl.sum(weights * v[None, :], axis=1)
        best = new_best
    tl.store(z_ptr + offs, acc / total, mask=offs < N0)
