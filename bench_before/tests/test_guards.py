import pytest
import torch

from grader import judge
from grader.protocol import guards


def test_poison_is_a_distinctive_nan_and_int_minimum():
    for dtype in (torch.float16, torch.float32, torch.bfloat16):
        buf = guards.fill_poison(torch.empty(4, dtype=dtype))
        assert buf.isnan().all()
        assert (guards.bits_view(buf) == guards.poison_bits(dtype)).all()
        computed_nan = torch.full((1,), float("nan"), dtype=dtype)
        assert int(guards.bits_view(computed_nan)[0]) != guards.poison_bits(dtype)
    assert guards.poison_bits(torch.int8) == -128


def test_guarded_copy_keeps_strides_and_poisons_gaps():
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    view = base[:, :3]
    buf, g, off = guards.guarded_copy(view, "cpu")
    assert g.stride() == (5, 1) and torch.equal(g, view)
    mask = guards.region_mask(buf.numel(), g.shape, g.stride(), off)
    assert int(mask.sum()) == 12
    assert buf[~mask].isnan().all()


def _record(buf, view, off):
    return guards.guard_record(buf, view, off)


def test_guard_check_reports_side_and_offsets():
    buf, view, off = guards.guarded_like(torch.empty(10, dtype=torch.int8))
    view.fill_(1)
    assert judge.check_guards(_record(buf, view, off), "q") is None
    buf[off + 10 : off + 13] = 5  # three past the end
    buf[off - 2] = 7  # one before the start
    msg = judge.check_guards(_record(buf, view, off), "q")
    assert "4 element(s) around q" in msg
    assert "1 before the start (offsets -2)" in msg
    assert "3 past the end (offsets +0, +1, +2)" in msg


def test_guard_check_reports_writes_into_gaps():
    base = torch.zeros(4, 8)
    buf, view, off = guards.guarded_copy(base[:, :5], "cpu")
    buf[off + 6] = 0.0  # row 0, column 6: inside the span but not part of the view
    msg = judge.check_guards(_record(buf, view, off), "x", input=True)
    assert "1 element(s) around x" in msg and "gaps between the rows" in msg


def test_guard_record_sends_changed_band_elements_and_a_digest_not_the_view():
    x = torch.randn(300)
    buf, view, off = guards.guarded_copy(x, "cpu")
    rec = guards.guard_record(buf, view, off, input=True)
    assert rec["changed"].numel() == 0 and rec["values"].numel() == 0 and rec["dtype"] == "float32"
    assert rec["sha256"] == guards.digest(x)
    view[7] = 0.0
    buf[off - 3] = 1.5
    buf[off + 300] = float("nan")  # a computed NaN: another bit pattern than the poison
    rec = guards.guard_record(buf, view, off, input=True)
    assert rec["sha256"] != guards.digest(x)
    assert rec["changed"].tolist() == [off - 3, off + 300] and rec["values"][0] == 1.5
    msg = judge.check_guards(rec, "x", input=True)
    assert "2 element(s) around x" in msg and "offsets -3" in msg and "offsets +0" in msg
    # The output poison is not the input poison: a band filled with the wrong kind reads as damage.
    assert guards.guard_record(buf, view, off)["changed"].numel() == buf.numel() - 300


@pytest.mark.parametrize("forge", ["inside_view", "unsorted", "out_of_range", "wrong_dtype", "no_values"])
def test_a_forged_guard_record_is_garbled_not_clean(forge):
    buf, view, off = guards.guarded_like(torch.empty(10, dtype=torch.int8))
    view.fill_(1)
    buf[off + 10] = 5
    buf[off - 1] = 6
    rec = guards.guard_record(buf, view, off)
    assert rec["changed"].tolist() == [off - 1, off + 10]
    if forge == "inside_view":  # hiding damage by listing an element of the view instead
        rec["changed"] = torch.tensor([off - 1, off + 2])
    elif forge == "unsorted":
        rec["changed"] = rec["changed"].flip(0)
    elif forge == "out_of_range":
        rec["changed"] = torch.tensor([off - 1, buf.numel()])
    elif forge == "wrong_dtype":
        rec["values"] = rec["values"].float()
    else:
        rec["values"] = None
    with pytest.raises(ValueError):
        judge.check_guards(rec, "q")


def test_region_mask_dense_strided_and_scalar():
    assert guards.region_mask(10, (3,), (1,), 2).nonzero().flatten().tolist() == [2, 3, 4]
    assert guards.region_mask(10, (2, 2), (3, 1), 1).nonzero().flatten().tolist() == [1, 2, 4, 5]
    assert guards.region_mask(10, (2, 2), (1, 2), 0).nonzero().flatten().tolist() == [0, 1, 2, 3]
    assert guards.region_mask(5, (), (), 3).nonzero().flatten().tolist() == [3]


def test_a_zero_dim_buffer_has_a_digest_and_a_guard_record():
    """A 0-dim output allocated by the wrapper (torch.empty(()), task 10's absmax) is guarded like any other:
    viewing its 2-byte element as bytes once crashed the worker, and every case with it."""
    from grader.protocol import guards

    buf, view, offset = guards.guarded_like(torch.empty((), dtype=torch.float16))
    view.fill_(1.5)
    record = guards.guard_record(buf, view, offset)
    assert record["size"] == [] and record["changed"].numel() == 0
    assert record["sha256"] == guards.digest(torch.tensor([1.5], dtype=torch.float16))
