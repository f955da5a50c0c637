"""Shared helpers: repo discovery, build root, errors, progress, commands."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

BASE_FILE = Path("kernel") / "BASE"
HEARTBEAT_S = 30.0


class DriverError(Exception):
    """An infrastructure or input problem, carried as one line of text."""

    def __init__(self, reason: str) -> None:
        super().__init__(one_line(reason))

    @property
    def reason(self) -> str:
        return str(self)


class InfraError(DriverError):
    """A problem of the machine or the network (a mirror that cannot be reached or does not
    answer), not of the input or the kernel under test: whatever comes next would meet it too,
    so a command of many runs (check) stops at the first."""


def error_line(e: BaseException) -> str:
    """One line for an error main() reports: DriverError's reason; an OSError's file and
    what went wrong; otherwise the exception's own text (with its type when that is empty
    or does not say it)."""
    if isinstance(e, DriverError):
        return e.reason
    if isinstance(e, UnicodeDecodeError):
        return one_line(f"not valid {e.encoding} text (byte {e.start}): {e.reason}")
    if isinstance(e, OSError) and e.strerror:
        names = [str(n) for n in (e.filename, e.filename2) if n is not None]
        return one_line(f"{' -> '.join(names)}: {e.strerror}" if names else e.strerror)
    text = one_line(str(e))
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def one_line(text: str) -> str:
    """Fold text into one line (non-empty lines joined with '; ')."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    return "; ".join(parts)


TRUE_WORDS = ("1", "yes", "true", "on", "y")
FALSE_WORDS = ("", "0", "no", "false", "off", "n")


def flag_value(name: str, text: str) -> bool:
    """A yes/no setting: 1/0, yes/no, true/false, on/off (any case; empty is no);
    DriverError for anything else."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise DriverError(f"{name}={text}: want 1 or 0 (yes/no, true/false)")


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """flag_value of an environment variable (unset: no)."""
    return flag_value(name, (os.environ if env is None else env).get(name, ""))


def say(msg: str) -> None:
    """Print a progress line to stderr, flushed."""
    print(f"[cgkunit] {msg}", file=sys.stderr, flush=True)


def plural(n: int, word: str) -> str:
    """'1 commit', '3 commits'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def fmt_time(secs: float) -> str:
    """'42s', '3m05s', '1h02m03s'."""
    s = int(round(secs))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else \
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def pct(x: float) -> str:
    """A rate as a percentage with one decimal: '12.5%'."""
    return f"{100 * x:.1f}%"


# the project this driver is part of: <repo>/tools/kunit/cgkunit/common.py
DRIVER_REPO = Path(__file__).resolve().parents[3]
ENTRY_POINT = Path("tools") / "kunit" / "cgkunit.py"


def find_repo_root(start: Path | None = None) -> Path:
    """Return the directory holding kernel/BASE, searching upwards (by default from the
    driver's own directory, then the current one); DriverError naming kernel/BASE when the
    project the driver is in has none."""
    starts = [start] if start is not None else [Path(__file__).resolve().parent, Path.cwd()]
    for s in starts:
        for d in [s.resolve(), *s.resolve().parents]:
            if (d / BASE_FILE).exists():  # a bad kernel/BASE is reported where it is read
                return d
    if start is None and (DRIVER_REPO / ENTRY_POINT).is_file():
        raise DriverError(f"{DRIVER_REPO / BASE_FILE} is missing: the pinned base (package, "
                          "version, sha256) every build starts from")
    raise DriverError(f"cannot find the project root (a directory holding {BASE_FILE})")


def user_path(raw: str, what: str) -> Path:
    """raw with a leading ~ or ~user expanded; DriverError naming what when it cannot be."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        raise DriverError(f"{what}: cannot expand {raw!r} (no such user or no home directory)") \
            from None


def overlaps(a: Path, b: Path) -> bool:
    """True when a and b (both resolved) are the same path or one is inside the other."""
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def read_text_file(path: Path) -> str:
    """The UTF-8 text of path; DriverError naming it when it is missing, a directory,
    unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise DriverError(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise DriverError(f"cannot read {path}: not valid UTF-8 (byte {e.start})") from None


def inside(root: Path, path: Path, what: str) -> Path:
    """path resolved; DriverError naming what unless it is root or below it (both resolved:
    '..' and symbolic links cannot lead out)."""
    try:
        full, top = path.resolve(), root.resolve()
    except (OSError, RuntimeError) as e:
        raise DriverError(f"{what} {path}: {error_line(e)}") from None
    if full != top and not full.is_relative_to(top):
        raise DriverError(f"{what} {path} is outside the build root {top}: the driver writes "
                          "only there")
    return full


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def safe_name(text: str, what: str) -> str:
    """text when it can name a directory under the build root (letters, digits and _.+-, no
    '/' and no '..'); DriverError naming what otherwise."""
    if not SAFE_NAME.fullmatch(text) or ".." in text:
        raise DriverError(f"{what} {text!r}: want a name (letters, digits and _.+-), not a path")
    return text


# Directories that are never a build root (the driver makes, rewrites and deletes trees,
# build directories and results below it), and trees it must never write into.
SYSTEM_DIRS = tuple(Path(d) for d in (
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
    "/var"))
PSEUDO_FS = tuple(Path(d) for d in ("/proc", "/sys", "/dev"))


def check_build_location(path: Path, repo: Path, what: str = "build root") -> None:
    """DriverError when path (resolved) cannot be a build root: /, a system directory, a
    place in /proc, /sys or /dev, the home directory, or the project itself or a
    directory holding it."""
    if path in SYSTEM_DIRS or any(path.is_relative_to(d) for d in PSEUDO_FS):
        raise DriverError(f"{what} {path}: a system directory; the driver makes and deletes "
                          "trees, build directories and results in its build root: use a "
                          "directory of its own")
    home = Path(os.path.expanduser("~"))
    if home.is_absolute() and path == home.resolve():
        raise DriverError(f"{what} {path}: your home directory; use a directory of its own")
    top = repo.resolve()
    if top == path or top.is_relative_to(path):
        raise DriverError(f"{what} {path}: " + ("the project itself" if top == path else
                                                f"holds the project {top}")
                          + "; use a directory of its own (default <repo>/build)")


def check_build_dir(path: Path, what: str = "build root") -> None:
    """DriverError unless path is (or can be made as) a writable directory."""
    try:
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as e:
        raise DriverError(f"{what} {path}: {e.strerror or e}") from None
    if not is_dir:
        raise DriverError(f"{what} {path}: " + ("not a directory" if existing == path
                                                else f"{existing} is not a directory"))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DriverError(f"{what} {path}: " + ("not writable" if existing == path
                                                else f"{existing} is not writable"))


def build_root(repo: Path, override: str | None = None,
               env: Mapping[str, str] | None = None) -> Path:
    """Build root: --build-dir, else $CGKUNIT_BUILD, else <repo>/build; DriverError
    when it is not (and cannot be made as) a writable directory."""
    env = os.environ if env is None else env
    what = "--build-dir" if override else "CGKUNIT_BUILD" if env.get("CGKUNIT_BUILD") else "build root"
    raw = override or env.get("CGKUNIT_BUILD") or str(repo / "build")
    path = user_path(raw, what)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        path = path.resolve()
    except (OSError, RuntimeError) as e:
        raise DriverError(f"{what} {raw}: {error_line(e)}") from None
    check_build_location(path, repo, what)
    check_build_dir(path, what)
    return path


@dataclass(frozen=True)
class Context:
    """Where a command works: the project (kernel/, lib/kunit-cgroup/, tools/kunit/; see
    find_repo_root) and the build root it writes under (build_root)."""
    repo: Path
    build: Path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json(path: Path) -> Any:
    """Parsed JSON of path, or None when absent or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def last_line(text: str, default: str = "") -> str:
    """Last non-empty line of text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else default


def _command_name(args: Sequence[str]) -> str:
    """'apt-get update': the program and its first word that is not an option."""
    words = [a for a in args[1:] if not a.startswith("-") and "=" not in a][:1]
    return " ".join([args[0], *words])


def run_cmd(args: Sequence[str], *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None, check: bool = True,
            input: str | None = None, timeout: float | None = None,
            heartbeat: Heartbeat | None = None,
            timeout_hint: str = "") -> subprocess.CompletedProcess[str]:
    """Run a command capturing text output; DriverError on failure if check. With timeout:
    the command and everything it started is killed after that many seconds, and
    InfraError says so (timeout_hint appended); with heartbeat, its progress lines go to
    stderr while the command runs (a network wait is never silent)."""
    try:
        popen = subprocess.Popen(list(args), cwd=cwd, env=dict(env) if env is not None else None,
                                 stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 errors="backslashreplace", start_new_session=timeout is not None)
    except FileNotFoundError:
        raise DriverError(f"command not found: {args[0]}") from None
    with popen, heartbeat or _NoHeartbeat():
        try:
            out, err = popen.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(popen)
            raise InfraError(f"{_command_name(args)} did not finish in {timeout:g} s; stopped it"
                             + (f": {timeout_hint}" if timeout_hint else "")) from None
        except BaseException:  # Ctrl-C: nothing it started goes on
            if timeout is not None:
                _kill_group(popen)
            raise
    proc = subprocess.CompletedProcess(list(args), popen.returncode, out, err)
    if check and proc.returncode != 0:
        detail = last_line(proc.stderr) or last_line(proc.stdout) or f"exit status {proc.returncode}"
        raise DriverError(f"{_command_name(args)} failed: {detail}")
    return proc


def _kill_group(popen: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group popen leads (start_new_session) and reap it; its pipes are
    then closed by everything that held them."""
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        popen.communicate(timeout=10)
    except (subprocess.TimeoutExpired, ValueError):  # ValueError: no pipes to read
        pass


class _NoHeartbeat:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class Heartbeat:
    """Context manager printing '<label>: still going, Ns' every interval, or
    '<label>: <status(seconds so far)>' with a status function (which falls back to the
    plain line when it raises: a progress line never costs the run a traceback)."""

    def __init__(self, label: str, interval: float = HEARTBEAT_S,
                 status: Callable[[float], str] | None = None) -> None:
        self.label = label
        self.interval = interval
        self.status = status
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def line(self) -> str:
        """The progress line for now."""
        elapsed = self.elapsed()
        if self.status is not None:
            try:
                return f"{self.label}: {one_line(self.status(elapsed))}"
            except Exception:  # best effort: a bug here must not stop the build
                pass
        return f"{self.label}: still going, {int(elapsed)}s"

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            say(self.line())

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_logged(args: Sequence[str], log: Path, label: str, *, cwd: Path | None = None,
               env: Mapping[str, str] | None = None,
               status: Callable[[float], str] | None = None) -> tuple[int, float]:
    """Run a long command with output to a log file and a heartbeat (status: its text, see
    Heartbeat); (rc, seconds). It runs in a session of its own: Ctrl-C or SIGTERM of the
    driver (KeyboardInterrupt) ends it and everything it started (a build's make and
    compilers), not only the command itself."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out, Heartbeat(label, status=status) as hb:
        out.write("$ " + " ".join(args) + "\n")
        out.flush()
        try:
            popen = subprocess.Popen(list(args), cwd=cwd,
                                     env=dict(env) if env is not None else None, stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        except FileNotFoundError:
            raise DriverError(f"command not found: {args[0]}") from None
        try:
            rc = popen.wait()
        except BaseException:
            _kill_group(popen)
            raise
        return rc, hb.elapsed()
