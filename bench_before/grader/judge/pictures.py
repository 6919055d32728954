"""Pictures of a failing output: which elements are wrong, never written, or written out of bounds.

The judge draws one PNG per failing case from data it already holds (the output the worker sent back, the
oracle's answer, the guard bands around the output); nothing here imports or runs a submission. It is the
grader's counterpart of the pictures triton-viz draws for the Triton Puzzles.

The output is drawn as a grid: a 1-D output wrapped into rows (of one block each when the task says which block
tiles it), a 2-D one as it is, a 3-D one as its 2-D slices stacked top to bottom. Rows of guard band written by the
kernel are drawn below (past the end) and above (before the start) the grid, in the order the buffer holds them.
Where task.yaml gives `launch.tiles` (for each output dimension, the SIZE/BLOCK pair of the grid axis that walks
it), tile borders are drawn and each tile with a problem is labelled with the program id that owns it. The
harness cannot see which program actually wrote an element; the label is the program that should have.

matplotlib draws the picture when it is installed; otherwise a small PNG writer (zlib only) draws the same grid
without text.
"""

from __future__ import annotations

import io
import struct
import zlib

import torch

OK, WRONG, UNWRITTEN, NAN, OOB = 0, 1, 2, 3, 4
COLORS = {OK: (0.80, 0.90, 0.80), WRONG: (0.85, 0.15, 0.15), UNWRITTEN: (0.15, 0.15, 0.15),
          NAN: (0.55, 0.20, 0.75), OOB: (1.00, 0.60, 0.00)}
LABELS = {OK: "right", WRONG: "wrong value", UNWRITTEN: "never written (poison)",
          NAN: "NaN (read poison outside an input?)", OOB: "written out of bounds"}
MAX_OOB_ROWS = 8
MAX_CELLS = 1 << 20


def classify(got: torch.Tensor, bad: torch.Tensor, poison: torch.Tensor) -> torch.Tensor:
    """Per element: OK, WRONG, UNWRITTEN (still poison) or NAN."""
    state = torch.full(got.shape, OK, dtype=torch.uint8)
    state[bad] = WRONG
    if got.is_floating_point():
        state[torch.isnan(got) & ~poison] = NAN
    state[poison] = UNWRITTEN
    return state


def _grid(state: torch.Tensor, wrap: int) -> tuple[torch.Tensor, int]:
    """The output as 2-D rows; returns (grid, rows per slice) so 3-D slices can be told apart."""
    if state.dim() == 0:
        return state.reshape(1, 1), 1
    if state.dim() == 1:
        n = state.numel()
        width = max(1, min(wrap, n))
        rows = -(-n // width)
        flat = torch.full((rows * width,), 255, dtype=torch.uint8)  # 255: padding, drawn white
        flat[:n] = state
        return flat.reshape(rows, width), rows
    rows = state.shape[-2]
    return state.reshape(-1, state.shape[-1]), rows


def _oob_rows(positions: list[int], width: int, before: bool) -> torch.Tensor:
    """Guard-band offsets (negative before the start, counted from the end past it) as rows of `width`."""
    if not positions:
        return torch.zeros(0, width, dtype=torch.uint8)
    if before:
        first = min(positions)
        n_rows = min(MAX_OOB_ROWS, (abs(first) + width - 1) // width)
        rows = torch.full((n_rows * width,), 255, dtype=torch.uint8)
        for p in positions:
            i = n_rows * width + p  # p < 0
            if 0 <= i < rows.numel():
                rows[i] = OOB
    else:
        n_rows = min(MAX_OOB_ROWS, max(positions) // width + 1)
        rows = torch.full((n_rows * width,), 255, dtype=torch.uint8)
        for p in positions:
            if p < rows.numel():
                rows[p] = OOB
    return rows.reshape(n_rows, width)


def render(name: str, title: str, state: torch.Tensor, before: list[int], after: list[int],
           tiles: list[tuple[int, int] | None] | None = None) -> tuple[bytes, str]:
    """PNG bytes of the picture and a line about the program ids of the tiles with a problem ('' if unknown).

    `tiles`: per output dimension, (block, grid axis) of the blocking that walks it, or None."""
    wrap = 64
    if state.dim() == 1 and tiles and tiles[0]:
        wrap = tiles[0][0] if tiles[0][0] <= 128 else 64
    grid, slice_rows = _grid(state, wrap)
    width = grid.shape[1]
    top = _oob_rows(before, width, before=True)
    bottom = _oob_rows(after, width, before=False)
    full = torch.cat([top, grid, bottom])
    if full.numel() > MAX_CELLS:
        full = full[: max(1, MAX_CELLS // width)]
    pids = owners(state, tiles) if tiles else []
    pid_line = ""
    if pids:
        shown = ", ".join(str(p) for p in pids[:8]) + (f" and {len(pids) - 8} more" if len(pids) > 8 else "")
        pid_line = f"the elements with a problem lie in the tiles of program id(s) {shown}"
    try:
        png = _render_matplotlib(name, title, full, top.shape[0], grid.shape[0], slice_rows, state, tiles, pids)
    except ImportError:
        png = _render_plain(full)
    return png, pid_line


def owners(state: torch.Tensor, tiles: list[tuple[int, int] | None]) -> list[tuple[int, int, int]]:
    """Program ids (p0, p1, p2) whose tile holds an element that is not OK, in order."""
    bad = (state != OK).nonzero()
    if not bad.numel() or len(tiles) != state.dim():
        return []
    pid = torch.zeros(bad.shape[0], 3, dtype=torch.long)
    for dim, tile in enumerate(tiles):
        if tile:
            block, axis = tile
            pid[:, axis] = bad[:, dim] // block
    return [tuple(int(v) for v in row) for row in torch.unique(pid, dim=0)]


def _render_matplotlib(name, title, full, n_top, n_grid, slice_rows, state, tiles, pids) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    h, w = full.shape
    rgb = torch.ones(h, w, 3)
    for code, color in COLORS.items():
        rgb[full == code] = torch.tensor(color)
    cell = max(0.06, min(0.3, 8.0 / max(w, 1)))
    fig = Figure(figsize=(min(12.0, max(5.0, w * cell + 1.5)), min(14.0, max(3.0, h * cell + 2.2))), dpi=100)
    ax = fig.add_subplot()
    aspect = "equal" if 1 / 12 <= h / max(w, 1) <= 12 else "auto"
    ax.imshow(rgb.numpy(), interpolation="nearest", aspect=aspect, extent=(0, w, h, 0))
    ax.set_title(title, fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axhline(n_top, color="black", linewidth=1.2)
    ax.axhline(n_top + n_grid, color="black", linewidth=1.2)
    if state.dim() >= 3:
        for r in range(n_top + slice_rows, n_top + n_grid, slice_rows):
            ax.axhline(r, color="black", linewidth=0.8, linestyle="--")
    if tiles and state.dim() >= 1:
        col_tile = tiles[-1] if state.dim() >= 2 else None
        row_tile = tiles[-2] if state.dim() >= 2 else None
        if col_tile:
            for x in range(col_tile[0], w, col_tile[0]):
                ax.axvline(x, color="steelblue", linewidth=0.6)
        if row_tile:
            for r in range(0, n_grid, slice_rows):
                for y in range(row_tile[0], slice_rows, row_tile[0]):
                    ax.axhline(n_top + r + y, color="steelblue", linewidth=0.6)
    ax.set_xlabel(f"{name}: last index" + (" (wrapped)" if state.dim() == 1 else ""), fontsize=8)
    ax.set_ylabel("rows" + (" (slices stacked)" if state.dim() >= 3 else ""), fontsize=8)
    present = [c for c in COLORS if bool((full == c).any())]
    fig.legend(handles=[Patch(color=COLORS[c], label=LABELS[c]) for c in present], fontsize=7,
               loc="lower right", ncol=len(present), frameon=False)
    if pids:
        shown = ", ".join(str(p) for p in pids[:6]) + (" ..." if len(pids) > 6 else "")
        fig.text(0.01, 0.97, f"tiles with a problem, by program id: {shown}", fontsize=7, va="top")
    if n_top:
        ax.text(w, n_top / 2, " before the start", fontsize=7, va="center")
    if h > n_top + n_grid:
        ax.text(w, n_top + n_grid + (h - n_top - n_grid) / 2, " past the end", fontsize=7, va="center")
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


def _render_plain(full: torch.Tensor, scale: int = 6) -> bytes:
    """The grid as a PNG, `scale` pixels a cell, with zlib only (no text)."""
    h, w = full.shape
    rgb = torch.full((h, w, 3), 255, dtype=torch.uint8)
    for code, color in COLORS.items():
        rgb[full == code] = torch.tensor([int(255 * c) for c in color], dtype=torch.uint8)
    img = rgb.repeat_interleave(scale, 0).repeat_interleave(scale, 1)
    raw = b"".join(b"\x00" + bytes(row.flatten().tolist()) for row in img)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w * scale, h * scale, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
