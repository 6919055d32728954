"""What a student reads for a known error (grader/protocol/known_errors.py): the worker names the kind, and the
message is written here from the table and the trusted side's own versions; no text of the worker's is copied,
and a kind or an API the table lacks is ignored (the error's own text is shown, as for any error)."""

from __future__ import annotations

from dataclasses import dataclass

from grader.protocol.known_errors import CUDA_ASSERT, UNSUPPORTED_API, UNSUPPORTED_APIS, UnsupportedApi, same_release

GUIDE = "docs/course-staff.md: Toolchain"


@dataclass(frozen=True)
class Tritons:
    """The triton release grading here (the trusted side's own) and the one the course grades with (config.yaml
    `toolchain`); "" where unknown."""

    installed: str = ""
    course: str = ""


CUDA_ASSERT_NOTE = (
    "note: the CPU check runs your file on CPU tensors, through Triton's interpreter, so an assert that asks for "
    "CUDA tensors (x.is_cuda, x.device.type == \"cuda\", torch.cuda...) fails every case here. Remove such "
    "asserts: on the course's GPU the inputs are CUDA tensors anyway.")
"""The line under a failed CUDA-only assert, on the CPU."""


def api_of(record: dict) -> UnsupportedApi | None:
    """The table's row for a record that names an unsupported API, else None."""
    if record.get("error_kind") != UNSUPPORTED_API:
        return None
    name = record.get("api")
    return UNSUPPORTED_APIS.get(name) if isinstance(name, str) else None


def unsupported_api(record: dict, tritons: Tritons, where: str = "") -> str | None:
    """The message for a call that raised because the installed triton, or its interpreter, lacks an API of the
    table; None when the record names none, or names one this triton has (the error is then the kernel's own)."""
    api = api_of(record)
    if api is None:
        return None
    here = f"triton {tritons.installed}" if tritons.installed else "the installed triton"
    course = tritons.course if any(same_release(tritons.course, v) for v in api.works_with) else ""
    at = f" ({where})" if where else ""
    if api.interpreter:  # a release removed it
        if any(same_release(tritons.installed, v) for v in api.works_with):
            return None
        theirs = (f"the course's GPU runs triton {course}, where it exists" if course
                  else f"triton {' and '.join(api.works_with)} has it")
        return (f"{api.name} is not in {here} (installed here); {theirs}: this check cannot grade it here{at}. "
                f"To be graded the same everywhere, use {api.instead} ({GUIDE}).")
    theirs = (f"the course's GPU (triton {course}) runs it" if course
              else f"a GPU runs it with triton {' and '.join(api.works_with)}")
    return (f"{api.name} runs on a GPU only: Triton's interpreter, which this CPU check uses ({here}), cannot run "
            f"it; {theirs}: this check cannot grade it here{at}. To be graded here too, use {api.instead} "
            f"({GUIDE}).")


def cuda_assert_note(record: dict, device: str) -> str | None:
    """The note under a failed assert that asks for CUDA tensors, on the CPU; None otherwise (on CUDA such an
    assert fails for some other reason, which its own text says)."""
    return CUDA_ASSERT_NOTE if device == "cpu" and record.get("error_kind") == CUDA_ASSERT else None
