"""Shared helpers: repo discovery, build root, errors, progress, commands."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
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


def one_line(text: str) -> str:
    """Fold text into one line (non-empty lines joined with '; ')."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    return "; ".join(parts)


def say(msg: str) -> None:
    """Print a progress line to stderr, flushed."""
    print(f"[cgkunit] {msg}", file=sys.stderr, flush=True)


def find_repo_root(start: Path | None = None) -> Path:
    """Return the directory holding kernel/BASE, searching upwards."""
    starts = [start] if start is not None else [Path(__file__).resolve().parent, Path.cwd()]
    for s in starts:
        for d in [s.resolve(), *s.resolve().parents]:
            if (d / BASE_FILE).exists():  # a bad kernel/BASE is reported where it is read
                return d
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
        raise DriverError(f"{what} {raw}: {e}") from None
    check_build_dir(path, what)
    return path


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


def run_cmd(args: Sequence[str], *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None, check: bool = True,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command capturing text output; DriverError on failure if check."""
    try:
        proc = subprocess.run(list(args), cwd=cwd, env=dict(env) if env is not None else None,
                              input=input, capture_output=True, text=True,
                              errors="backslashreplace",
                              stdin=None if input is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError(f"command not found: {args[0]}") from None
    if check and proc.returncode != 0:
        detail = last_line(proc.stderr) or last_line(proc.stdout) or f"exit status {proc.returncode}"
        words = [a for a in args[1:] if not a.startswith("-") and "=" not in a][:1]
        raise DriverError(f"{' '.join([args[0], *words])} failed: {detail}")
    return proc


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
    Heartbeat); (rc, seconds)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out, Heartbeat(label, status=status) as hb:
        out.write("$ " + " ".join(args) + "\n")
        out.flush()
        try:
            rc = subprocess.call(list(args), cwd=cwd, env=dict(env) if env is not None else None,
                                 stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise DriverError(f"command not found: {args[0]}") from None
        return rc, hb.elapsed()
