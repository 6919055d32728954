"""Triton's file cache for a sandboxed worker: the job's own cache over a shared one that only the grader writes.

A worker compiles into its job's own cache (TRITON_CACHE_DIR, in the job folder): a cache shared by every worker
would let one student's worker plant a compiled module that another student's worker then loads. What every job
builds alike, Triton's driver module (cuda_utils, built with the C compiler: a second or so of CPU a job) and the
C launchers of the reference solutions' kernels, the grader builds once into a shared cache (GRADER_TRITON_SHARED)
that the sandbox lets workers read but not write; a compiled kernel never goes there (`publish_launchers`).
This cache manager (TRITON_CACHE_MANAGER=grader.worker.tritoncache:LayeredCache) looks in
the job's cache first, then in the shared one, and writes only to the job's. Entries are keyed by a hash of
their source, so a shared entry is only ever found by a worker that would have built the same thing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from triton.runtime.cache import FileCacheManager

SHARED_ENV = "GRADER_TRITON_SHARED"
MANAGER = "grader.worker.tritoncache:LayeredCache"


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


def _modules_only(entry: Path) -> bool:
    """A cache entry that holds compiled C modules (`*.so`) and nothing else."""
    files = list(entry.iterdir())
    return bool(files) and all(f.name.endswith(".so") and f.is_file() and not f.is_symlink() for f in files)


def prune_shared() -> int:
    """Remove from the shared cache every entry that is not C modules only (a grader before 2026-11-25 compiled
    the reference solutions' kernels into it). Returns how many were removed."""
    shared = shared_dir()
    removed = 0
    for entry in sorted(shared.iterdir()) if shared.is_dir() else []:
        if entry.name.startswith(".") or (entry.is_dir() and not entry.is_symlink() and _modules_only(entry)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    return removed


def publish_launchers(private: Path) -> int:
    """Copy into the shared cache the entries of a trusted run's own cache that hold compiled C modules only
    (`*.so`: Triton's launchers and its driver module, built from a kernel's signature alone), and nothing else.
    A kernel's entries (.json, .ttir, .ptx, .cubin, ...) never go there: every worker may read the shared cache,
    and the trusted runs that fill it are the reference solutions. Returns how many entries were copied."""
    shared = shared_dir()
    shared.mkdir(parents=True, exist_ok=True)
    copied = 0
    for entry in sorted(private.iterdir()) if private.is_dir() else []:
        if entry.is_symlink() or not entry.is_dir() or (shared / entry.name).exists() or not _modules_only(entry):
            continue
        staging = shared / f".{entry.name}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(entry, staging)
        try:
            os.rename(staging, shared / entry.name)  # whole or not at all; another run may have put it there
            copied += 1
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return copied
