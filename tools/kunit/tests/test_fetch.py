"""fetch: BASE parsing, mirror discovery, checksum, and the flow with fake apt tools."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from cgkunit import fetch
from cgkunit.common import DriverError, InfraError

PKG = "linux-source-7.3"
PINNED = "7.3.4-1~bpo13+1"
NEWER = "7.3.9-1~bpo13+1"


def one_line_error(exc: pytest.ExceptionInfo[DriverError]) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def write_base(repo: Path, sha: str = "a" * 64, **over: str) -> Path:
    values = {"package": PKG, "version": PINNED, "suite": "trixie-backports", "sha256": sha,
              "tarball": "usr/src/linux-source-7.3.tar.xz", **over}
    (repo / "kernel").mkdir(parents=True, exist_ok=True)
    path = repo / "kernel" / "BASE"
    path.write_text("# pinned base\n\n" + "".join(f"{k}={v}\n" for k, v in values.items() if v))
    return path


# --- BASE -------------------------------------------------------------------

def test_parse_base(tmp_path: Path) -> None:
    spec = fetch.parse_base(write_base(tmp_path, sha="AB" * 32))
    assert spec == fetch.BaseSpec(package=PKG, version=PINNED, suite="trixie-backports",
                                  sha256="ab" * 32, tarball="usr/src/linux-source-7.3.tar.xz")


def test_real_base_file_parses() -> None:
    from conftest import KUNIT_DIR
    spec = fetch.parse_base(KUNIT_DIR.parent.parent / "kernel" / "BASE")
    assert spec.package.startswith("linux-source-") and len(spec.sha256) == 64


@pytest.mark.parametrize("text,needle", [
    ("package=x\nversion\n", "expected key=value"),
    ("package=x\npackage=y\n", "duplicate key 'package'"),
    ("package=x\nversion=1\n", "missing suite, sha256, tarball"),
    ("package=x\nversion=1\nsuite=s\ntarball=t\nsha256=xyz\n", "sha256 is not 64 hex digits"),
])
def test_parse_base_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "BASE"
    path.write_text(text)
    with pytest.raises(DriverError) as exc:
        fetch.parse_base(path)
    assert needle in one_line_error(exc)


def test_parse_base_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DriverError) as exc:
        fetch.parse_base(tmp_path / "nope")
    assert "cannot read" in one_line_error(exc)


# --- mirror -----------------------------------------------------------------

def etc(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "etc-apt"
    (root / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_mirror_from_deb822_skips_security(tmp_path: Path) -> None:
    root = etc(tmp_path, {"sources.list.d/debian.sources": DEB822})
    assert fetch.find_mirror({}, root) == "http://mirror.example.org/debian"


def test_mirror_deb822_skips_disabled_and_foreign(tmp_path: Path) -> None:
    root = etc(tmp_path, {
        "sources.list.d/a.sources": "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\n"
                                    "Suites: jammy\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n",
        "sources.list.d/b.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: trixie\n",
        "sources.list.d/c.sources": "Types: deb-src\nURIs: http://src.example/debian\nSuites: trixie\n",
        "sources.list.d/d.sources": "Types: deb\nURIs: http://on.example/debian\nSuites: trixie\n",
    })
    assert fetch.find_mirror({}, root) == "http://on.example/debian"


def test_mirror_from_one_line(tmp_path: Path) -> None:
    root = etc(tmp_path, {"sources.list": (
        "# comment\n"
        "deb http://security.debian.org/debian-security bookworm-security main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://ftp.example.net/debian bookworm main contrib\n")})
    assert fetch.find_mirror({}, root) == "http://ftp.example.net/debian"


def test_mirror_from_list_in_parts_dir(tmp_path: Path) -> None:
    root = etc(tmp_path, {"sources.list.d/x.list": "deb http://list.example/debian trixie main\n"})
    assert fetch.find_mirror({}, root) == "http://list.example/debian"


def test_mirror_env_override(tmp_path: Path) -> None:
    root = etc(tmp_path, {"sources.list.d/debian.sources": DEB822})
    assert fetch.find_mirror({"CGKUNIT_APT_MIRROR": "http://local/debian/"}, root) == "http://local/debian"


def test_no_mirror(tmp_path: Path) -> None:
    root = etc(tmp_path, {"sources.list": "deb http://archive.ubuntu.com/ubuntu jammy main\n"})
    with pytest.raises(DriverError) as exc:
        fetch.find_mirror({}, root)
    assert one_line_error(exc) == "no Debian mirror found in /etc/apt; set CGKUNIT_APT_MIRROR"


# --- apt pieces -----------------------------------------------------------------

POLICY = f"""{PKG}:
  Installed: (none)
  Candidate: {NEWER}
  Version table:
     {NEWER} 100
        100 http://deb.debian.org/debian trixie-backports/main amd64 Packages
 *** {PINNED} 100
        100 /var/lib/dpkg/status
"""


def test_parse_policy() -> None:
    assert fetch.parse_policy(POLICY) == (NEWER, [NEWER, PINNED])
    assert fetch.parse_policy("N: Unable to locate package nope\n") == (None, [])


def test_setup_apt_writes_a_private_deb822(tmp_path: Path) -> None:
    key = tmp_path / "key.gpg"
    key.write_text("k")
    apt = fetch.setup_apt(tmp_path, "http://m/debian", "trixie-backports", key)
    text = (apt / "sources" / "cgkunit.sources").read_text()
    assert "URIs: http://m/debian\nSuites: trixie-backports\nComponents: main\n" in text
    assert f"Signed-By: {key}" in text
    assert (apt / "lists" / "partial").is_dir() and (apt / "cache" / "archives" / "partial").is_dir()
    opts = fetch.apt_options(apt)
    assert "Dir::Etc::SourceList=/dev/null" in opts
    assert f"Dir::Etc::SourceParts={apt / 'sources'}" in opts


def test_checksum_mismatch_deletes_the_file(tmp_path: Path) -> None:
    deb = tmp_path / f"{PKG}_{PINNED}_all.deb"
    deb.write_bytes(b"not the real thing")
    got = hashlib.sha256(b"not the real thing").hexdigest()
    with pytest.raises(DriverError) as exc:
        fetch.verify_deb(deb, "0" * 64)
    assert one_line_error(exc) == (f"checksum mismatch for {deb.name}: expected {'0' * 64}, got {got}")
    assert not deb.exists()


def test_deb_path_handles_epochs(tmp_path: Path) -> None:
    (tmp_path / "pkg_1%3a2.0-1_all.deb").write_bytes(b"x")
    assert fetch.deb_path(tmp_path, "pkg", "1:2.0-1") == tmp_path / "pkg_1%3a2.0-1_all.deb"
    assert fetch.deb_path(tmp_path, "pkg", "2.0-1") is None


# --- the whole flow with fake apt-get / apt-cache / dpkg-deb ---------------------

FAKE_APT = r'''#!{py}
import os, shutil, sys
args = sys.argv[1:]
rest = []
while args:
    a = args.pop(0)
    if a == "-o":
        args.pop(0)
    else:
        rest.append(a)
name = os.path.basename(sys.argv[0])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(name + " " + " ".join(rest) + "\n")
versions = os.environ["FAKE_VERSIONS"].split()
if name == "apt-get" and rest[0] == os.environ.get("FAKE_HANG"):
    # a mirror that accepts and never answers: apt waits, and so does what it started
    import subprocess, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(os.environ["FAKE_LOG"] + ".pids", "w").write(f"{os.getpid()} {child.pid}")
    time.sleep(600)
if name == "apt-get" and rest[0] == "update" and os.environ.get("FAKE_UNREACHABLE"):
    # what apt-get update prints, exiting 0, when the mirror cannot be reached
    print("Err:1 http://m/debian trixie-backports InRelease\n  Could not resolve 'm'")
    print("W: Failed to fetch http://m/debian/dists/trixie-backports/InRelease  "
          "Could not resolve 'm'", file=sys.stderr)
elif name == "apt-cache" and rest[0] == "policy" and versions:
    print(rest[1] + ":\n  Installed: (none)\n  Candidate: " + versions[0] + "\n  Version table:")
    for v in versions:
        print("     " + v + " 100\n        100 http://m/debian trixie-backports/main amd64 Packages")
elif name == "apt-get" and rest[0] == "download":
    pkg, ver = rest[1].split("=")
    if ver not in versions:
        sys.exit("E: Version '" + ver + "' for '" + pkg + "' was not found")
    shutil.copy(os.path.join(os.environ["FAKE_DEBS"], pkg + "_" + ver + "_all.deb"), ".")
elif name == "dpkg-deb" and rest[0] == "-x":
    dest = os.path.join(rest[2], "usr", "src")
    os.makedirs(dest)
    shutil.copy(os.environ["FAKE_TARBALL"], os.path.join(dest, "linux-source-7.3.tar.xz"))
'''


@pytest.fixture
def fake_apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("apt-get", "apt-cache", "dpkg-deb"):
        tool = bin_dir / name
        tool.write_text(FAKE_APT.replace("{py}", sys.executable))
        tool.chmod(0o755)
    debs = tmp_path / "debs"
    debs.mkdir()
    for v in (PINNED, NEWER):
        (debs / f"{PKG}_{v}_all.deb").write_bytes(f"deb {v}".encode())
    tarball = tmp_path / "src.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        for name, text in (("Makefile", "all:\n"), ("kernel/cgroup/cgroup.c", "int x;\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"linux-source-7.3/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    key = tmp_path / "key.gpg"
    key.write_text("k")
    log = tmp_path / "calls.log"
    log.write_text("")
    monkeypatch.setattr(fetch, "KEYRING", key)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_DEBS", str(debs))
    monkeypatch.setenv("FAKE_TARBALL", str(tarball))
    monkeypatch.setenv("FAKE_VERSIONS", PINNED)
    monkeypatch.setenv("CGKUNIT_APT_MIRROR", "http://m/debian")
    return {"log": log, "debs": debs}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_pinned_then_cached(tmp_path: Path, fake_apt: dict[str, Path]) -> None:
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_base(repo, sha=sha(fake_apt["debs"] / f"{PKG}_{PINNED}_all.deb"))
    base = fetch.fetch_base(repo, build)
    assert base.pinned and base.version == PINNED
    assert base.path == build / "base" / "src" / PINNED
    assert (base.path / "kernel" / "cgroup" / "cgroup.c").read_text() == "int x;\n"
    assert not list((build / "base" / "src").glob(".tmp-*"))
    calls = fake_apt["log"].read_text().splitlines()
    assert calls[0] == "apt-get update" and f"apt-get download {PKG}={PINNED}" in calls
    fake_apt["log"].write_text("")
    again = fetch.fetch_base(repo, build)
    assert again == base
    assert fake_apt["log"].read_text() == ""  # no network step the second time


def test_a_pin_that_cannot_be_met_is_bad_input(
        tmp_path: Path, fake_apt: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned version is gone (or kernel/BASE names one that never was): exit status 2,
    nothing downloaded, unless the user asks for the newest (CGKUNIT_UNPINNED=1)."""
    monkeypatch.setenv("FAKE_VERSIONS", NEWER)
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_base(repo)
    with pytest.raises(DriverError) as exc:
        fetch.fetch_base(repo, build)
    assert str(exc.value).startswith(f"{PKG} {PINNED} (kernel/BASE's pin) is not available from ")
    assert f"set CGKUNIT_UNPINNED=1 to build the newest ({NEWER}) without the sha256 pin" \
        in str(exc.value)
    assert not list((build / "base").glob("*.deb")) and not (build / "base" / "src").exists()
    monkeypatch.setenv("CGKUNIT_UNPINNED", "no")
    with pytest.raises(DriverError):
        fetch.fetch_base(repo, build)
    monkeypatch.setenv("CGKUNIT_UNPINNED", "maybe")
    with pytest.raises(DriverError, match="CGKUNIT_UNPINNED=maybe: want 1 or 0"):
        fetch.fetch_base(repo, build)


def test_fetch_falls_back_to_newest_when_asked(
        tmp_path: Path, fake_apt: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_VERSIONS", NEWER)
    monkeypatch.setenv("CGKUNIT_UNPINNED", "1")
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_base(repo)
    base = fetch.fetch_base(repo, build)
    assert not base.pinned and base.version == NEWER
    assert base.sha256 == sha(fake_apt["debs"] / f"{PKG}_{NEWER}_all.deb")
    err = capsys.readouterr().err
    assert f"pinned {PKG} {PINNED} is gone from trixie-backports; using newest {NEWER}" in err


def test_fetch_checksum_mismatch(tmp_path: Path, fake_apt: dict[str, Path]) -> None:
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_base(repo, sha="0" * 64)
    with pytest.raises(DriverError) as exc:
        fetch.fetch_base(repo, build)
    assert one_line_error(exc).startswith(f"checksum mismatch for {PKG}_{PINNED}_all.deb: expected 000")
    assert not list((build / "base").glob("*.deb"))
    assert not (build / "base" / "src" / PINNED).exists()


def test_fetch_package_missing(tmp_path: Path, fake_apt: dict[str, Path],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VERSIONS", "")
    repo = tmp_path / "repo"
    write_base(repo)
    with pytest.raises(DriverError) as exc:
        fetch.fetch_base(repo, tmp_path / "build")
    assert "not available from http://m/debian trixie-backports" in one_line_error(exc)


def test_fetch_mirror_unreachable(tmp_path: Path, fake_apt: dict[str, Path],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VERSIONS", "")
    monkeypatch.setenv("FAKE_UNREACHABLE", "1")
    repo = tmp_path / "repo"
    write_base(repo)
    with pytest.raises(DriverError) as exc:
        fetch.fetch_base(repo, tmp_path / "build")
    assert one_line_error(exc) == (
        "cannot reach the Debian mirror http://m/debian: http://m/debian/dists/"
        "trixie-backports/InRelease Could not resolve 'm'")


@pytest.mark.parametrize("output, want", [
    ("Hit:1 http://deb.debian.org/debian trixie InRelease\nReading package lists...", None),
    ("Err:1 http://x/debian trixie InRelease\n  Temporary failure resolving 'x'",
     "Err:1 http://x/debian trixie InRelease"),
    ("W: Failed to fetch http://x/a  Connection failed [IP: 10.0.0.1 80]\n",
     "http://x/a Connection failed [IP: 10.0.0.1 80]"),
])
def test_fetch_failure_lines(output: str, want: str | None) -> None:
    assert fetch.fetch_failure(output) == want


@pytest.mark.parametrize("step", ["update", "download"])
def test_a_mirror_that_never_answers(tmp_path: Path, fake_apt: dict[str, Path],
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str], step: str) -> None:
    """Progress lines while it waits, then a clear error (an infrastructure one), and
    nothing it started left running."""
    monkeypatch.setenv("FAKE_HANG", step)
    monkeypatch.setattr(fetch, "NET_HEARTBEAT_S", 0.3)
    monkeypatch.setattr(fetch, "UPDATE_TIMEOUT_S", 1.5)
    monkeypatch.setattr(fetch, "DOWNLOAD_TIMEOUT_S", 1.5)
    repo, build = tmp_path / "repo", tmp_path / "build"
    write_base(repo, sha=sha(fake_apt["debs"] / f"{PKG}_{PINNED}_all.deb"))
    with pytest.raises(InfraError) as exc:
        fetch.fetch_base(repo, build)
    err = capsys.readouterr().err
    if step == "update":
        assert str(exc.value) == ("apt-get update did not finish in 1.5 s; stopped it: the "
                                  "mirror http://m/debian did not answer (CGKUNIT_APT_MIRROR "
                                  "picks another)")
        assert "[cgkunit] apt-get update from http://m/debian: no answer yet, " in err
    else:
        assert str(exc.value).startswith("apt-get download did not finish in 1.5 s; stopped it: "
                                         "the mirror is too slow or stopped sending")
        assert f"[cgkunit] downloading {PKG}: 0.0 MB so far, " in err
    apt, child = (int(x) for x in Path(str(fake_apt["log"]) + ".pids").read_text().split())
    assert not running(apt) and not running(child)
    assert not list((build / "base").glob("*.deb"))


def running(pid: int) -> bool:
    """Whether pid runs (a zombie does not), waiting a little for a kill to land."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("Z", "X"):
            return False
        import time
        time.sleep(0.1)
    return True


def test_apt_gives_up_on_a_silent_mirror() -> None:
    opts = fetch.apt_options(Path("/x"))
    assert f"Acquire::http::Timeout={fetch.NET_IDLE_S}" in opts and "Acquire::Retries=1" in opts


SILENT_MIRROR = """import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accepts, never answers
"""


@pytest.mark.skipif(shutil.which("apt-get") is None or not fetch.KEYRING.is_file(),
                    reason="needs apt-get and Debian's archive keyring")
def test_real_apt_on_a_mirror_that_accepts_and_never_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    server = subprocess.Popen([sys.executable, "-c", SILENT_MIRROR], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert server.stdout is not None
        mirror = f"http://127.0.0.1:{server.stdout.readline().strip()}/debian"
        monkeypatch.setenv("CGKUNIT_APT_MIRROR", mirror)
        monkeypatch.setattr(fetch, "NET_IDLE_S", 2)
        monkeypatch.setattr(fetch, "NET_HEARTBEAT_S", 1.0)
        repo = tmp_path / "repo"
        write_base(repo)
        with pytest.raises(InfraError, match=f"^cannot reach the Debian mirror {mirror}: "):
            fetch.fetch_base(repo, tmp_path / "build")
        err = capsys.readouterr().err
        assert f"[cgkunit] apt-get update from {mirror}: no answer yet, 1s" in err
    finally:
        server.kill()
        server.wait()
