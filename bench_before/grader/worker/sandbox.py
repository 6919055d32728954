"""The worker's sandbox: what a submission can reach once the worker has loaded its inputs.

Applied by the worker (grader/worker/main.py) after it has read its job and inputs and before it imports the
submission, in this order, each layer reported on its own (`apply` returns {layer: "on: ..." | "off: why"}):

* network: a new network namespace (no interface but a loopback that is down), so nothing is reachable; with
  Landlock ABI >= 4, TCP bind and connect are refused as well;
* user: the same namespace call puts the worker in a user namespace of its own: it keeps its user id (files stay
  readable as they were; Landlock below decides which), but holds no capability outside that namespace, and the
  process limit below counts this worker alone;
* processes: the same call makes a PID namespace, and the worker goes on as its process 1 (a fork): when the
  worker ends, the kernel kills whatever it started, even a process in a session of its own;
* limits (setrlimit): processes and threads (RLIMIT_NPROC: a fork bomb dies alone), open files, file size,
  CPU seconds, no core dumps, and memory through RLIMIT_DATA, which counts private writable memory (what a
  runaway allocation grows) but not the address space CUDA reserves (an RLIMIT_AS breaks CUDA contexts);
* files and programs (Landlock): read only Python and its packages, the system's libraries and headers, a few
  files of /etc, /proc and /sys, the grader's own package and the devices a run needs (null, zero, random,
  the NVIDIA devices); read and write only the job folder (which holds the private temp folder and the job's
  Triton cache); execute only the toolchain Triton runs when it compiles (ptxas and friends from its backend,
  the C compiler it builds launchers with, the dynamic loader); signals and abstract unix sockets
  stay inside the sandbox (ABI >= 6). `tasks/`, `reference/`, `submissions/`, `results/`, the ledger, home
  folders and every other job's folder are out of reach.

Landlock is used through its three system calls with ctypes: no package to install. Every layer that cannot be
applied on a machine is reported as off, and grading goes on (the staff JSON shows the report).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# ----------------------------------------------------------------------------------------------- Landlock ABI

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
# FS_IOCTL_DEV (ABI 5) is left unhandled: CUDA drives the GPU through ioctls on the device files it may open.

NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE
READ = FS_READ_FILE | FS_READ_DIR
RUN = READ | FS_EXECUTE
WRITE = (READ | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SYM
         | FS_MAKE_FIFO | FS_MAKE_SOCK | FS_REFER | FS_TRUNCATE)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args) -> int:
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def _handled_fs(abi: int) -> int:
    rights = (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE
              | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM)
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def landlock(rules: dict[str, int], abi: int) -> str:
    """Restrict this process (and all it starts) to `rules` ({path: rights}); paths that do not exist are skipped.
    Returns what was handled, for the report. Raises OSError when the kernel refuses."""
    handled = _handled_fs(abi)
    attr = _RulesetAttr(handled, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for path, rights in rules.items():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights &= handled
                if not os.path.isdir(path):
                    rights &= _FILE_RIGHTS
                beneath = _PathBeneathAttr(rights, fd)
                _syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                         ctypes.byref(beneath), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: required without CAP_SYS_ADMIN, and wanted anyway
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    extra = (", TCP bind/connect refused" if abi >= 4 else "") + (", signals and abstract sockets scoped"
                                                                    if abi >= 6 else "")
    return f"Landlock ABI {abi}: {len(rules)} rules{extra}"


# ------------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Limits:
    """Resource limits of a sandboxed worker (config.yaml: grading.sandbox)."""

    memory_mb: int = 16384
    """RLIMIT_DATA: private writable memory (heap, anonymous mappings), in MiB."""
    processes: int = 512
    """RLIMIT_NPROC: processes and threads of the worker (counted in its own user namespace)."""
    open_files: int = 4096
    """RLIMIT_NOFILE."""
    file_size_mb: int = 2048
    """RLIMIT_FSIZE: the largest file the worker may write, in MiB."""
    cpu_s: int = 0
    """RLIMIT_CPU in seconds; 0 = four times the worker's wall-clock limit (the wall clock is the main guard)."""


@dataclass
class Plan:
    """What one worker may reach. Paths are absolute; rights are Landlock rights."""

    rules: dict[str, int] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    cpu_s: int = 600
    pid_namespace: bool = True
    """Run the worker as process 1 of a PID namespace of its own (off on CUDA: see PID_NAMESPACE_CUDA)."""

    def allow(self, path: str | os.PathLike, rights: int) -> None:
        path = os.path.realpath(path)
        self.rules[path] = self.rules.get(path, 0) | rights


ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf", "passwd", "group",
             "host.conf", "os-release", "alternatives", "gai.conf")
"""What of /etc a run reads: the dynamic loader's cache, the time zone, user names (and gcc's alternatives)."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
LIBRARY_DIRS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/include", "/usr/local/include",
                "/usr/share/zoneinfo", "/usr/local/cuda", "/usr/lib/wsl")
"""Shared libraries (CUDA's driver among them) and the headers gcc needs to build Triton's launchers. /usr/bin is
not here: programs are readable only where they may be run."""


@functools.lru_cache(maxsize=1)
def toolchain() -> tuple[str, ...]:
    """Programs (and program folders) Triton runs when it compiles: its backend's binaries (ptxas, ...), the C/C++
    compiler it builds launchers and its driver module with, with gcc's own helpers, the assembler and linker,
    and the dynamic loader that starts them. Not ldconfig, which Triton runs to find libcuda: `libcuda_dir`
    answers that before the sandbox (on Debian-like systems ldconfig is a shell script, and no shell may run)."""
    found: list[str] = []
    try:
        import triton

        found.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin"))
    except ImportError:  # pragma: no cover - the worker needs triton anyway
        pass
    for name in ("as", "ld", "ld.bfd", "ld.gold"):
        path = shutil.which(name)
        if path:
            found.append(os.path.realpath(path))
    gcc = compiler()
    if gcc:
        found.append(gcc)
        for prog in ("cc1", "cc1plus", "collect2", "lto-wrapper"):
            try:
                out = subprocess.run([gcc, f"-print-prog-name={prog}"], capture_output=True, text=True,
                                     timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                continue
            if os.path.isabs(out):
                found.append(os.path.dirname(os.path.realpath(out)))
    for path in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"):
        if os.path.exists(path):
            found.append(os.path.realpath(path))
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=1)
def compiler() -> str | None:
    """The C compiler Triton builds its launchers with, as the program itself (no wrapper script: no shell may
    run in the sandbox): $CC, else gcc, cc or clang on the PATH. The worker passes it to Triton as CC."""
    for name in (os.environ.get("CC"), "gcc", "cc", "clang"):
        path = shutil.which(name) if name else None
        if not path:
            continue
        real = os.path.realpath(path)
        try:
            with open(real, "rb") as fh:
                if fh.read(2) == b"#!":
                    continue
        except OSError:
            continue
        return real
    return None


@functools.lru_cache(maxsize=1)
def libcuda_dir() -> str | None:
    """The folder of the CUDA driver library, as Triton would find it with `ldconfig -p`; the worker passes it
    to Triton as TRITON_LIBCUDA_PATH, so that Triton need not run ldconfig inside the sandbox."""
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            if "libcuda.so.1" in line and "=>" in line:
                return os.path.dirname(line.split("=>")[-1].strip())
    return None


def toolchain_env(device: str) -> dict[str, str]:
    """What Triton is told before the sandbox, so that it runs neither ldconfig (to find libcuda) nor a compiler's
    wrapper script (no shell may run): TRITON_LIBCUDA_PATH on CUDA, and CC, the compiler itself."""
    env = {}
    if device == "cuda" and libcuda_dir() and "TRITON_LIBCUDA_PATH" not in os.environ:
        env["TRITON_LIBCUDA_PATH"] = libcuda_dir()
    if compiler():
        env["CC"] = compiler()
    return env


PYTHON_PACKAGES = ("torch", "triton", "numpy")
"""Packages whose folders the worker reads wherever they are installed (normally in site-packages already)."""


def python_paths(root: Path) -> list[str]:
    """Python's own folders: its standard library and site-packages, from a fixed list (never sys.path, whose
    first entry can be the working directory), and the folders of PYTHON_PACKAGES; without the project itself
    (the grader's package is added on its own; tasks/, reference/ and submissions/ stay out of reach)."""
    import importlib.util
    import site

    found = sysconfig.get_paths()
    paths = [found[k] for k in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude") if k in found]
    paths += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    for name in PYTHON_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            paths += [os.path.dirname(p) for p in spec.submodule_search_locations]
    root = root.resolve()
    keep = []
    for p in paths:
        if not p or not os.path.isdir(p):
            continue
        real = Path(os.path.realpath(p))
        if real == root or root.is_relative_to(real) or real == Path(os.path.realpath(tempfile.gettempdir())):
            continue  # the project, a folder that contains it, or the temp folder
        if real.is_relative_to(root) and real.relative_to(root).parts[0] in PROJECT_SECRETS:
            continue
        keep.append(str(real))
    return list(dict.fromkeys(keep))


PROJECT_SECRETS = ("tasks", "reference", "submissions", "results")
"""Project folders a worker never reads, even when a Python path points inside them."""


def plan(writable: list[Path], root: Path, device: str, timeout_s: float, limits: Limits) -> Plan:
    """The rules for a worker that may write only the folders `writable` (its run folder, where its temp folder
    is, and its job's Triton cache: grader/protocol); everything else it may reach is read-only or run-only."""
    p = Plan(limits=limits, cpu_s=limits.cpu_s or int(4 * timeout_s) + 60, pid_namespace=device != "cuda")
    for path in python_paths(root):
        p.allow(path, READ)
    p.allow(root / "grader", READ)
    for path in (*LIBRARY_DIRS, *os.environ.get("LD_LIBRARY_PATH", "").split(":")):
        if path:
            p.allow(path, READ)
    if device == "cuda" and libcuda_dir():
        p.allow(libcuda_dir(), READ)  # the driver library (and its neighbours), wherever the system keeps it
    for name in ETC_FILES:
        p.allow(Path("/etc") / name, READ)
    for path in ("/proc", "/sys"):
        p.allow(path, READ)
    # The CUDA driver writes into its own /proc entries (opened for writing with truncation; seen on the H100
    # box: without this, cudaGetDeviceCount fails with error 304). Only the worker's own: /proc/sys stays read-only.
    p.allow("/proc/self", READ | FS_WRITE_FILE | FS_TRUNCATE)
    for path in DEVICES:
        p.allow(path, FS_READ_FILE | FS_WRITE_FILE)
    if device == "cuda":
        for name in sorted(os.listdir("/dev")):
            if name.startswith("nvidia"):
                p.allow(Path("/dev") / name, FS_READ_FILE | FS_WRITE_FILE | FS_READ_DIR)
    for path in toolchain():
        p.allow(path, RUN)
    from grader.worker.tritoncache import shared_dir

    p.allow(shared_dir(), READ)  # what the grader built for every job (grader/worker/tritoncache.py): read only
    for folder in writable:
        p.allow(folder, WRITE)
    return p


# ------------------------------------------------------------------------------------------------ applying


PID_NAMESPACE_CUDA = ("off on CUDA: on the H100 (2026-11-24) a worker in a PID namespace of its own exited with "
                      "code 0 before its first case, not yet understood; the static policy refuses the ways to "
                      "fork found so far")


def _unshare(pid_namespace: bool = True) -> tuple[str, str, bool, bool]:
    """A network namespace of the worker's own, inside a user namespace of its own when the process is still
    single-threaded (the kernel's rule): then no capability is left outside it. As root, the worker first takes
    a real user id of its own (SANDBOX_UID_BASE + pid) while keeping root as its effective and file-system id:
    files stay readable as they were (Landlock below decides which), and RLIMIT_NPROC, which counts processes by
    real user and exempts only root and holders of capabilities, then counts this worker's processes alone.
    A PID namespace as well where the kernel allows it (see go_on_in_a_child). Returns the report's network and user
    lines, whether the limit on processes means something, and whether a PID namespace was made."""
    own = ""
    if os.geteuid() == 0:
        uid = SANDBOX_UID_BASE + os.getpid()
        try:
            os.setresuid(uid, 0, 0)
            own = f", real uid {uid}"
        except OSError:
            pass
    euid, egid = os.geteuid(), os.getegid()
    pid_ns = pid_namespace and _libc.unshare(ctypes.c_int(CLONE_NEWNET | CLONE_NEWUSER | CLONE_NEWPID)) == 0
    if pid_ns or _libc.unshare(ctypes.c_int(CLONE_NEWNET | CLONE_NEWUSER)) == 0:
        # Map the effective user and group to themselves (what the process creates needs an owner the
        # namespace knows); the real uid stays unmapped, as it should.
        for name, line in (("setgroups", "deny"), ("uid_map", f"{euid} {euid} 1"), ("gid_map", f"{egid} {egid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(line)
        return (f"on: {NETWORK_WORDS}", f"on: a user namespace of its own (no capability outside it){own}",
                bool(own) or os.geteuid() != 0, pid_ns)
    err = ctypes.get_errno()
    user = f"off: a user namespace was refused ({os.strerror(err)}; {len(os.listdir('/proc/self/task'))} threads)"
    if _libc.unshare(ctypes.c_int(CLONE_NEWNET)) == 0:
        return f"on: {NETWORK_WORDS}", user, False, False
    err = ctypes.get_errno()
    return f"off: unshare failed ({os.strerror(err)})", user, False, False


def go_on_in_a_child() -> None:
    """Fork: the child returns and goes on; this process waits and ends as the child did (the same exit code, or
    killed by the same signal, so that the runner reads the same exit: killed by SIGSEGV). The worker uses it to
    become single-threaded (a user namespace needs it) and to become process 1 of a new PID namespace: when that
    process ends (or is killed with the worker's process group), the kernel kills everything else in the
    namespace, so a process the submission started in a session of its own (`os.setsid()`, out of reach of the
    runner's killpg) does not outlive the worker."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    child = os.fork()
    if child == 0:
        return
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))


CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWPID = 0x40000000, 0x10000000, 0x20000000
SANDBOX_UID_BASE = 1_000_000
"""A root worker's real user id is SANDBOX_UID_BASE + its pid: unique among live processes, never a real user."""
NETWORK_WORDS = "a network namespace of its own (no route anywhere)"


def _set_limits(p: Plan, own_uid: bool) -> str:
    mib = 1 << 20
    table = [("RLIMIT_DATA", p.limits.memory_mb * mib, f"memory {p.limits.memory_mb} MiB"),
             ("RLIMIT_NOFILE", p.limits.open_files, f"{p.limits.open_files} open files"),
             ("RLIMIT_FSIZE", p.limits.file_size_mb * mib, f"files up to {p.limits.file_size_mb} MiB"),
             ("RLIMIT_CPU", p.cpu_s, f"{p.cpu_s} CPU s"),
             ("RLIMIT_CORE", 0, "no core dumps")]
    if own_uid:  # RLIMIT_NPROC counts every process of the uid (in its user namespace): only then is it the worker's
        table.append(("RLIMIT_NPROC", p.limits.processes, f"{p.limits.processes} processes and threads"))
    done = []
    for name, value, words in table:
        which = getattr(resource, name)
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
        done.append(words)
    if not own_uid:
        done.append("processes not limited (no user namespace of its own)")
    return "on: " + ", ".join(done)


LAYERS = ("namespaces", "limits", "files")


def apply(p: Plan, run_folder: Path, layers: tuple[str, ...] = LAYERS) -> dict[str, str]:
    """Apply every layer that this machine offers, in the order that works (namespaces first, while the process is
    single-threaded; Landlock last, so that nothing before it needs a refused file). Returns a report
    {layer: "on: ..." | "off: reason"}; a layer that fails is reported, not fatal."""
    report: dict[str, str] = {}
    pid_ns = False
    if "namespaces" in layers:
        report["network"], report["user"], counted, pid_ns = _unshare(p.pid_namespace)
    else:
        report["network"] = report["user"] = "off: not asked for"
        counted = False
    # A temporary folder of the worker's own, in its run folder (new and empty: the runner made it), open to every
    # user id (the worker's compilers run with the worker's real id; Landlock keeps everyone else out). TMP and
    # TEMP too: a child of this process runs in the kernel's secure-exec mode (its real and effective users
    # differ), where the C library drops TMPDIR, and gcc then looks at TMP. Nothing may be written to /tmp.
    private = Path(run_folder) / "tmp"
    private.mkdir()
    os.chmod(private, 0o777)
    for name in ("TMPDIR", "TMP", "TEMP"):
        os.environ[name] = str(private)
    import tempfile

    tempfile.tempdir = None  # tempfile caches its folder: look again
    report["tmp"] = "on: a temporary folder of its own in its run folder; /tmp is not writable"
    if pid_ns:
        go_on_in_a_child()  # the child is the new namespace's process 1
        report["processes"] = "on: a PID namespace of its own: whatever the worker starts ends with it"
    else:
        report["processes"] = ("off: not asked for" if "namespaces" not in layers else PID_NAMESPACE_CUDA
                               if not p.pid_namespace else "off: no PID namespace (a process started in a session "
                               "of its own may outlive the worker)")
    try:
        report["limits"] = _set_limits(p, counted) if "limits" in layers else "off: not asked for"
    except (OSError, ValueError) as exc:
        report["limits"] = f"off: setrlimit failed ({exc})"
    abi = landlock_abi()
    if "files" not in layers:
        report["files"] = "off: not asked for"
    elif not abi:
        report["files"] = "off: Landlock is not available in this kernel"
    else:
        try:
            report["files"] = "on: " + landlock(p.rules, abi)
        except OSError as exc:
            report["files"] = f"off: Landlock refused the rules ({exc})"
    return report


# ------------------------------------------------------------------------------------------------ messages

REFUSED_ERRNOS = {errno.EACCES, errno.EPERM}


def explain(exc: BaseException, root: Path) -> str | None:
    """A student-facing sentence for an error the sandbox caused, or None. It names what was refused, with a
    path relative to the project when it lies inside it (`opening tasks/10_x/solution.py was refused`)."""
    import traceback

    chain, seen = [], set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        reason = getattr(e, "reason", None)  # urllib's URLError keeps the socket's error here
        e = reason if isinstance(reason, BaseException) else (e.__cause__ or e.__context__)
    def network(e: BaseException) -> bool:
        if not isinstance(e, OSError):
            return False
        frames = traceback.extract_tb(e.__traceback__)
        return e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EADDRNOTAVAIL) \
            or "Network is unreachable" in str(e) \
            or (e.errno in REFUSED_ERRNOS and not e.filename
                and any(os.path.basename(f.filename) == "socket.py" for f in frames))

    if any(network(e) for e in chain):
        return "a network connection was refused: the grader's sandbox has no network"
    for e in chain:
        if isinstance(e, BlockingIOError) or (isinstance(e, OSError) and e.errno == errno.EAGAIN):
            return "starting a process was refused: the grader's sandbox limits processes and threads"
        if isinstance(e, MemoryError):
            return "allocating memory was refused: the grader's sandbox limits the worker's memory"
        if isinstance(e, OSError) and e.errno in REFUSED_ERRNOS and e.filename:
            frames = traceback.extract_tb(e.__traceback__)
            verb = "running" if any(f.name in ("_execute_child", "execv", "execve", "posix_spawn") or
                                    "subprocess" in f.filename for f in frames) else "opening"
            return f"{verb} {_shown(str(e.filename), root)} was refused by the grader's sandbox"
    for e in chain:
        text = str(e)
        if "Permission denied" in text or "Operation not permitted" in text:
            path = _path_in(text)
            what = f"opening {_shown(path, root)}" if path else "an operation"
            return f"{what} was refused by the grader's sandbox"
    return None


def _path_in(text: str) -> str | None:
    """The first absolute path in an error's text (torch writes `<path>`, Python `'path'`)."""
    for word in re.split(r"[\s'\"()<>:]+", text):
        if word.startswith("/") and len(word) > 1:
            return word
    return None


def _shown(path: str, root: Path) -> str:
    try:
        return str(Path(os.path.realpath(path)).relative_to(root.resolve()))
    except ValueError:
        return path
