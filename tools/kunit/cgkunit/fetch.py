"""Fetch the pinned Debian kernel source package and unpack it once."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .common import (HEARTBEAT_S, DriverError, Heartbeat, InfraError, env_flag, read_json, read_text_file,
                     run_cmd, run_logged, say, sha256_file, write_json)

KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEBIAN_SUITES = frozenset({
    "buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
    "stable", "testing", "unstable", "oldstable", "oldoldstable", "experimental",
})
REQUIRED_KEYS = ("package", "version", "suite", "sha256", "tarball")
# Debian's version syntax: [epoch:]upstream[-revision], what apt-cache policy lists
DEB_VERSION = re.compile(r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*")
DEB_PACKAGE = re.compile(r"[a-z0-9][a-z0-9.+-]+")
UNPINNED_ENV = "CGKUNIT_UNPINNED"  # 1: build the newest version when the pinned one is gone
# Network waits: apt gives up on a mirror that sends nothing for NET_IDLE_S (per try, one
# retry), and the driver stops the whole command after these many seconds, saying why.
NET_IDLE_S = 30
UPDATE_TIMEOUT_S = 300.0
DOWNLOAD_TIMEOUT_S = 3600.0
NET_HEARTBEAT_S = HEARTBEAT_S  # a progress line this often while the network is waited on


@dataclass(frozen=True)
class BaseSpec:
    """The pin from kernel/BASE."""
    package: str
    version: str
    suite: str
    sha256: str
    tarball: str


@dataclass(frozen=True)
class BaseSource:
    """An unpacked base source tree."""
    path: Path
    package: str
    version: str
    sha256: str
    pinned: bool

    @property
    def id(self) -> str:
        return f"debian:{self.package}={self.version}:{self.sha256}"


def parse_base(path: Path) -> BaseSpec:
    """Parse kernel/BASE (key=value lines, '#' comments)."""
    text = read_text_file(path)
    values: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise DriverError(f"{path}:{n}: expected key=value, got {line!r}")
        if key in values:
            raise DriverError(f"{path}:{n}: duplicate key {key!r}")
        values[key] = value
    missing = [k for k in REQUIRED_KEYS if k not in values]
    if missing:
        raise DriverError(f"{path}: missing {', '.join(missing)}")
    if not re.fullmatch(r"[0-9a-f]{64}", values["sha256"].lower()):
        raise DriverError(f"{path}: sha256 is not 64 hex digits")
    if not DEB_VERSION.fullmatch(values["version"]):
        raise DriverError(f"{path}: version {values['version']!r} is not a Debian version")
    if not DEB_PACKAGE.fullmatch(values["package"]):
        raise DriverError(f"{path}: package {values['package']!r} is not a Debian package name")
    return BaseSpec(package=values["package"], version=values["version"],
                    suite=values["suite"], sha256=values["sha256"].lower(),
                    tarball=values["tarball"].removeprefix("./"))


# --- mirror discovery -------------------------------------------------------

def _suite_is_debian(suite: str) -> bool:
    return suite.split("-")[0] in DEBIAN_SUITES and not suite.endswith("-security")


def parse_deb822(text: str) -> list[dict[str, str]]:
    """Stanzas of a deb822 file as lower-cased key -> value."""
    stanzas: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    key = ""
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if cur:
                stanzas.append(cur)
            cur, key = {}, ""
        elif raw[0] in " \t":
            if key:
                cur[key] += "\n" + raw.strip()
        elif ":" in raw:
            k, _, v = raw.partition(":")
            key = k.strip().lower()
            cur[key] = v.strip()
    return stanzas


def _mirror_from_deb822(text: str) -> str | None:
    for st in parse_deb822(text):
        if "deb" not in st.get("types", "").split() or st.get("enabled", "yes").lower() == "no":
            continue
        uris = st.get("uris", "").split()
        suites = st.get("suites", "").split()
        if not uris or not suites or all(s.endswith("-security") for s in suites):
            continue
        if "debian" in st.get("signed-by", "").lower() or any(_suite_is_debian(s) for s in suites):
            return uris[0]
    return None


def _mirror_from_one_line(text: str) -> str | None:
    for raw in text.splitlines():
        tokens = raw.split("#", 1)[0].split()
        if len(tokens) < 3 or tokens[0] != "deb":
            continue
        rest = tokens[1:]
        if rest[0].startswith("["):
            while rest and not rest[0].endswith("]"):
                rest = rest[1:]
            rest = rest[1:]
        if len(rest) < 2:
            continue
        uri, suite = rest[0], rest[1]
        if suite.endswith("-security"):
            continue
        if _suite_is_debian(suite) or "debian" in uri:
            return uri
    return None


def find_mirror(env: Mapping[str, str] | None = None, etc_apt: Path = Path("/etc/apt")) -> str:
    """The Debian mirror URI: $CGKUNIT_APT_MIRROR, else the system's apt sources."""
    env = os.environ if env is None else env
    if env.get("CGKUNIT_APT_MIRROR"):
        return env["CGKUNIT_APT_MIRROR"].rstrip("/")
    parts = etc_apt / "sources.list.d"
    candidates: list[tuple[Path, bool]] = [(p, True) for p in sorted(parts.glob("*.sources"))]
    candidates.append((etc_apt / "sources.list", False))
    candidates += [(p, False) for p in sorted(parts.glob("*.list"))]
    for path, deb822 in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        uri = _mirror_from_deb822(text) if deb822 else _mirror_from_one_line(text)
        if uri:
            return uri.rstrip("/")
    raise DriverError("no Debian mirror found in /etc/apt; set CGKUNIT_APT_MIRROR")


# --- private apt ------------------------------------------------------------

def setup_apt(base_dir: Path, mirror: str, suite: str, keyring: Path | None = None) -> Path:
    """Create the private apt tree under <base_dir>/apt and return it."""
    keyring = keyring or KEYRING
    if not keyring.is_file():
        raise DriverError(f"missing {keyring} (apt-get install debian-archive-keyring)")
    apt = base_dir / "apt"
    for d in ("sources", "lists/partial", "cache/archives/partial"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    (apt / "sources" / "cgkunit.sources").write_text(
        f"Types: deb\nURIs: {mirror}\nSuites: {suite}\nComponents: main\nSigned-By: {keyring}\n")
    return apt


def apt_options(apt: Path) -> list[str]:
    """-o options pointing apt at the private tree only."""
    opts = ["-o", "Dir::Etc::SourceList=/dev/null",
            "-o", f"Dir::Etc::SourceParts={apt / 'sources'}",
            "-o", f"Dir::State::Lists={apt / 'lists'}",
            "-o", f"Dir::Cache={apt / 'cache'}",
            "-o", f"Acquire::http::Timeout={NET_IDLE_S}",
            "-o", f"Acquire::https::Timeout={NET_IDLE_S}",
            "-o", "Acquire::Retries=1"]
    if os.geteuid() == 0:
        opts += ["-o", "APT::Sandbox::User=root"]
    return opts


def parse_policy(text: str) -> tuple[str | None, list[str]]:
    """(candidate, versions in the version table) from `apt-cache policy`."""
    candidate: str | None = None
    versions: list[str] = []
    in_table = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Candidate:"):
            c = s.split(":", 1)[1].strip()
            candidate = None if c == "(none)" else c
        elif s.startswith("Version table:"):
            in_table = True
        elif in_table:
            m = re.fullmatch(r"(?:\*\*\*\s+)?(\S+)\s+-?\d+", s)
            if m:
                versions.append(m.group(1))
    return candidate, versions


def deb_path(base_dir: Path, package: str, version: str) -> Path | None:
    """The downloaded .deb for package=version, if present."""
    quoted = version.replace(":", "%3a")
    hits = sorted(glob.glob(str(base_dir / f"{glob.escape(package)}_{glob.escape(quoted)}_*.deb")))
    return Path(hits[0]) if hits else None


def stamp_path(base_dir: Path, version: str) -> Path:
    return base_dir / "src" / f"{version}.json"


def verify_deb(deb: Path, expected: str) -> str:
    """Check the sha256 of deb; on mismatch delete it and raise."""
    got = sha256_file(deb)
    if got != expected.lower():
        deb.unlink(missing_ok=True)
        raise DriverError(f"checksum mismatch for {deb.name}: expected {expected}, got {got}")
    return got


DOWNLOAD_PREFIX = ".download-"


def download_deb(apt_opts: list[str], base_dir: Path, package: str, version: str,
                 expected: str | None) -> tuple[Path, str]:
    """apt-get download package=version into base_dir; (the .deb, its sha256).

    The download goes to a temporary directory beside it and the .deb is renamed into
    base_dir only once complete and, when expected is given, verified: an interrupted or
    bad download leaves nothing under the final name (the temporary is removed)."""
    for stale in base_dir.glob(f"{DOWNLOAD_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=base_dir, prefix=DOWNLOAD_PREFIX))
    try:
        say(f"downloading {package} {version}")
        network(["apt-get", *apt_opts, "download", f"{package}={version}"], DOWNLOAD_TIMEOUT_S,
                Heartbeat(f"downloading {package}", NET_HEARTBEAT_S,
                          status=lambda s: f"{_downloaded(tmp)} so far, {s:.0f}s"),
                "the mirror is too slow or stopped sending (CGKUNIT_APT_MIRROR picks another)",
                cwd=tmp)
        got = deb_path(tmp, package, version)
        if got is None:
            raise DriverError(f"apt-get download left no {package}_{version}_*.deb in {base_dir}")
        digest = verify_deb(got, expected) if expected else sha256_file(got)
        final = base_dir / got.name
        os.replace(got, final)
        return final, digest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def network(args: list[str], timeout: float, heartbeat: Heartbeat, hint: str,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """run_cmd of a command that waits on the network: progress lines while it runs, stopped
    after timeout seconds; its failure is an InfraError (the machine's, not the input's)."""
    try:
        return run_cmd(args, cwd=cwd, timeout=timeout, heartbeat=heartbeat, timeout_hint=hint)
    except InfraError:
        raise
    except DriverError as e:
        raise InfraError(e.reason) from None


def _downloaded(where: Path) -> str:
    """How much apt has written into where (its partial files included): '12.3 MB'."""
    total = sum(p.stat().st_size for p in where.rglob("*") if p.is_file())
    return f"{total / 1e6:.1f} MB"


def cached_base(base_dir: Path, package: str, version: str) -> BaseSource | None:
    """The unpacked base when its stamp and .deb are present and match."""
    stamp = read_json(stamp_path(base_dir, version))
    deb = deb_path(base_dir, package, version)
    src = base_dir / "src" / version
    if not isinstance(stamp, dict) or deb is None or not src.is_dir():
        return None
    st = deb.stat()
    if (stamp.get("package"), stamp.get("version")) != (package, version) or \
            (stamp.get("deb_size"), stamp.get("deb_mtime_ns")) != (st.st_size, st.st_mtime_ns):
        return None
    return BaseSource(path=src, package=package, version=version,
                      sha256=str(stamp.get("sha256")), pinned=bool(stamp.get("pinned")))


def unpack(deb: Path, tarball: str, base_dir: Path, package: str, version: str,
           sha256: str, pinned: bool) -> BaseSource:
    """Extract the tarball from the .deb and unpack it into src/<version>."""
    src_root = base_dir / "src"
    src_root.mkdir(parents=True, exist_ok=True)
    for stale in src_root.glob(".tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    stamp_path(base_dir, version).unlink(missing_ok=True)
    final = src_root / version
    tmp = Path(tempfile.mkdtemp(dir=src_root, prefix=f".tmp-{version}-"))
    try:
        say(f"extracting {tarball} from {deb.name}")
        run_cmd(["dpkg-deb", "-x", str(deb), str(tmp / "deb")])
        tar = tmp / "deb" / tarball
        if not tar.is_file():
            raise DriverError(f"{deb.name} does not contain {tarball}")
        out = tmp / "src"
        out.mkdir()
        rc, secs = run_logged(["tar", "-xf", str(tar), "-C", str(out), "--strip-components=1"],
                              base_dir / "unpack.log", "unpacking the base source")
        if rc != 0:
            raise DriverError(f"unpacking {tar.name} failed; see {base_dir / 'unpack.log'}")
        say(f"unpacked {package} {version} in {secs:.0f}s")
        if final.exists():
            shutil.rmtree(final)
        os.replace(out, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    st = deb.stat()
    write_json(stamp_path(base_dir, version), {
        "package": package, "version": version, "sha256": sha256, "pinned": pinned,
        "deb": deb.name, "deb_size": st.st_size, "deb_mtime_ns": st.st_mtime_ns})
    return BaseSource(path=final, package=package, version=version, sha256=sha256, pinned=pinned)


def fetch_failure(update_output: str) -> str | None:
    """What apt-get update could not fetch, from its output: it exits 0 after
    'W: Failed to fetch <url>  <why>' or 'Err:1 <url> ... <why>' when a mirror cannot be
    reached. None when it fetched everything."""
    for line in update_output.splitlines():
        line = line.strip()
        if line.startswith(("W: Failed to fetch ", "E: Failed to fetch ")):
            return " ".join(line.split()[4:])
    for line in update_output.splitlines():
        if line.startswith("Err:"):
            return " ".join(line.split())
    return None


def fetch_base(repo: Path, build: Path, env: Mapping[str, str] | None = None) -> BaseSource:
    """Make <build>/base/src/<version> hold the base source; network only when needed."""
    spec = parse_base(repo / "kernel" / "BASE")
    base_dir = build / "base"
    base_dir.mkdir(parents=True, exist_ok=True)
    cached = cached_base(base_dir, spec.package, spec.version)
    if cached is not None and cached.sha256 == spec.sha256:
        say(f"base {spec.package} {spec.version} already unpacked")
        return cached
    mirror = find_mirror(env)
    opts = apt_options(setup_apt(base_dir, mirror, spec.suite))
    say(f"apt-get update for {spec.suite} from {mirror}")
    update = network(["apt-get", *opts, "update"], UPDATE_TIMEOUT_S,
                     Heartbeat(f"apt-get update from {mirror}", NET_HEARTBEAT_S,
                               status=lambda s: f"no answer yet, {s:.0f}s"),
                     f"the mirror {mirror} did not answer (CGKUNIT_APT_MIRROR picks another)")
    candidate, versions = parse_policy(run_cmd(["apt-cache", *opts, "policy", spec.package]).stdout)
    unreachable = fetch_failure(update.stdout + update.stderr)
    if unreachable and not versions and not candidate:
        raise InfraError(f"cannot reach the Debian mirror {mirror}: {unreachable}")
    if spec.version in versions:
        version, pinned = spec.version, True
    elif candidate and env_flag(UNPINNED_ENV, env):
        version, pinned = candidate, False
        say(f"WARNING: pinned {spec.package} {spec.version} is gone from {spec.suite}; "
            f"using newest {candidate}, unpinned ({UNPINNED_ENV}=1)")
        cached = cached_base(base_dir, spec.package, version)
        if cached is not None:
            return cached
    elif candidate:
        raise DriverError(f"{spec.package} {spec.version} (kernel/BASE's pin) is not available "
                          f"from {mirror} {spec.suite} (it has {', '.join(versions) or candidate}): "
                          f"fix kernel/BASE, or set {UNPINNED_ENV}=1 to build the newest "
                          f"({candidate}) without the sha256 pin")
    else:
        raise DriverError(f"{spec.package} is not available from {mirror} {spec.suite}")
    deb = deb_path(base_dir, spec.package, version)
    if deb is None:
        deb, digest = download_deb(opts, base_dir, spec.package, version,
                                   spec.sha256 if pinned else None)
    elif pinned:
        digest = verify_deb(deb, spec.sha256)
    else:
        digest = sha256_file(deb)
    if not pinned:
        say(f"unpinned {deb.name} has sha256 {digest}")
    return unpack(deb, spec.tarball, base_dir, spec.package, version, digest, pinned)
