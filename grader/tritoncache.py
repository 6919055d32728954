"""Triton's file cache for a sandboxed worker: the job's own cache over a shared one that only the grader writes.

A worker compiles into its job's own cache (TRITON_CACHE_DIR, in the job folder): a cache shared by every worker
would let one student's worker plant a compiled module that another student's worker then loads. What every job
builds alike, Triton's driver module (cuda_utils, built with the C compiler: a second or so of CPU a job), the
grader builds once, before any submission runs, into a shared cache (GRADER_TRITON_SHARED) that the sandbox lets
workers read but not write. This cache manager (TRITON_CACHE_MANAGER=grader.tritoncache:LayeredCache) looks in
the job's cache first, then in the shared one, and writes only to the job's. Entries are keyed by a hash of
their source, so a shared entry is only ever found by a worker that would have built the same thing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from triton.runtime.cache import FileCacheManager

SHARED_ENV = "GRADER_TRITON_SHARED"
MANAGER = "grader.tritoncache:LayeredCache"


def shared_dir() -> Path:
    """The shared cache: $GRADER_TRITON_SHARED, else a folder of the grader's user's own cache."""
    return Path(os.environ.get(SHARED_ENV) or Path.home() / ".cache" / "triton-grader-shared")


class LayeredCache(FileCacheManager):
    """FileCacheManager over the job's cache, falling back to the shared one for reads."""

    def __init__(self, key, override=False, dump=False) -> None:
        super().__init__(key, override=override, dump=dump)
        root = os.environ.get(SHARED_ENV)
        self.shared = os.path.join(root, key) if root and not (override or dump) else None

    def get_file(self, filename: str) -> str | None:
        found = super().get_file(filename)
        if found is None and self.shared and os.path.exists(os.path.join(self.shared, filename)):
            return os.path.join(self.shared, filename)
        return found

    def get_group(self, filename: str) -> dict[str, str] | None:
        found = super().get_group(filename)
        if found is not None or not self.shared:
            return found
        try:
            with open(os.path.join(self.shared, f"__grp__{filename}")) as fh:
                children = json.load(fh).get("child_paths") or {}
        except (OSError, ValueError, AttributeError):
            return None
        inside = all(os.path.dirname(p) == self.shared and os.path.exists(p) for p in children.values())
        return dict(children) if children and inside else None


def warm_shared(device: str) -> str:
    """Build what every CUDA job needs alike into the shared cache, as the grader (before any submission runs):
    Triton's driver module. Needs no CUDA context (the fork server calls it before it forks). Returns a line for
    the log."""
    if device != "cuda":
        return "nothing to warm on the CPU"
    from triton.backends.nvidia import driver

    folder = shared_dir()
    folder.mkdir(parents=True, exist_ok=True)
    before = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(folder)
    try:
        driver.CudaUtils()
    finally:
        if before is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = before
    return f"Triton's driver module is in {folder}"
