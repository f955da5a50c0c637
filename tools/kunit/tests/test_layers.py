"""The driver's module layering, read from its import graph (ast: nothing is imported), and
the layer under it all: the suite (lib/kunit-cgroup), which knows nothing of the driver.

cli is the top: it imports the commands, and making them work is its job. A command is
one module per command of the driver; what several commands share lives below them. So:
no command imports another command (or cli), nothing below the commands imports one, no
import cycle anywhere, and no private name (_x) is used outside its module. Every module
is classified here, and named in the layering note of cgkunit/__init__.py's docstring."""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from conftest import KUNIT_DIR

PACKAGE = KUNIT_DIR / "cgkunit"
TOP = {"cli"}
COMMANDS = {"bench", "bisection", "check", "coverage", "mbox", "module_run", "reach",
            "series_check", "stress"}
# shared by the commands (and cli's handlers of run, build, prepare, fetch, report, profiles
# and deps): engines, the report, the inputs, helpers
BELOW = {"__init__", "boots", "carry", "checklist", "commits", "common", "console", "deps",
         "export", "fetch", "fixes", "lock", "machine", "params", "pipeline", "plot", "procs",
         "profile", "progress", "report", "run", "signature", "stats", "summary", "titles",
         "tree"}

Graph = dict[str, set[str]]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def read_module(path: Path, modules: set[str], package: str) -> tuple[set[str], list[str]]:
    """(the package's modules path imports, anywhere in it; the private names it takes
    from them: 'from .x import _y' or 'x._y')."""
    tree = ast.parse(path.read_text(), str(path))
    imports: set[str] = set()
    private: list[str] = []
    aliases: dict[str, str] = {}  # a name bound to one of the package's modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                head, _, rest = a.name.partition(".")
                if head == package and rest in modules:
                    imports.add(rest)
                    if a.asname:
                        aliases[a.asname] = rest
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 or node.module == package:
                source = node.module if node.level == 1 else None
            elif node.level == 0 and (node.module or "").startswith(package + "."):
                source = (node.module or "").split(".", 1)[1]
            else:
                continue
            for a in node.names:
                if source is None:  # from . import x (as y)
                    if a.name in modules:
                        imports.add(a.name)
                        aliases[a.asname or a.name] = a.name
                    continue
                imports.add(source)
                if _is_private(a.name):
                    private.append(f"from {source} import {a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and _is_private(node.attr):
            private.append(f"{aliases[node.value.id]}.{node.attr} (line {node.lineno})")
    imports.discard(path.stem)
    return imports, private


def import_graph(package_dir: Path) -> tuple[Graph, dict[str, list[str]]]:
    """Each module of the package -> the package's modules it imports; and the private
    names each takes from the others."""
    modules = {p.stem for p in package_dir.glob("*.py")}
    graph: Graph = {}
    private: dict[str, list[str]] = {}
    for path in sorted(package_dir.glob("*.py")):
        graph[path.stem], taken = read_module(path, modules, package_dir.name)
        if taken:
            private[path.stem] = taken
    return graph, private


def cycles(graph: Graph) -> list[list[str]]:
    """The import cycles: each strongly connected component of more than one module
    (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_violations(graph: Graph, top: set[str], commands: set[str]) -> list[str]:
    """'a -> b' for each command that imports a command or the top, and each module below
    the commands that imports one of them or the top."""
    out = []
    for module, imported in sorted(graph.items()):
        if module in top:
            continue
        for other in sorted(imported & (commands | top)):
            what = "command" if module in commands else "module below the commands"
            out.append(f"{what} {module} imports {'command ' if other in commands else ''}{other}")
    return out


GRAPH, PRIVATE = import_graph(PACKAGE)


def test_every_module_has_its_layer() -> None:
    assert not (TOP & COMMANDS or TOP & BELOW or COMMANDS & BELOW)
    assert set(GRAPH) == TOP | COMMANDS | BELOW, \
        "classify the new module in tests/test_layers.py and cgkunit/__init__.py"


def test_no_command_imports_a_command_and_nothing_below_imports_one() -> None:
    assert layer_violations(GRAPH, TOP, COMMANDS) == []


def test_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_no_private_name_crosses_modules() -> None:
    assert PRIVATE == {}


def test_the_package_docstring_names_every_module() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""
    words = set(doc.replace(",", " ").replace(":", " ").split())
    assert sorted((TOP | COMMANDS | BELOW) - {"__init__"} - words) == []


# --- the checks see what they are for ---------------------------------------------------

def write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "cgkunit"
    pkg.mkdir()
    for name, text in {"__init__": "", **files}.items():
        (pkg / f"{name}.py").write_text(text)
    return pkg


@pytest.mark.parametrize("text", ["from . import b", "from .b import run", "from . import b as bb",
                                  "import cgkunit.b", "from cgkunit import b",
                                  "from cgkunit.b import run",
                                  "def f():\n    from .b import run\n    return run"])
def test_a_command_importing_a_command_is_seen(tmp_path: Path, text: str) -> None:
    pkg = write_package(tmp_path, {"a": text, "b": "def run(): pass\n", "low": ""})
    graph, _ = import_graph(pkg)
    assert layer_violations(graph, {"top"}, {"a", "b"}) == ["command a imports command b"]
    assert layer_violations(graph, {"top"}, {"a"}) == []


def test_a_module_below_importing_a_command_or_the_top_is_seen(tmp_path: Path) -> None:
    pkg = write_package(tmp_path, {"cmd": "from . import low", "low": "from . import top",
                                   "top": "from . import cmd", "deep": "from .cmd import x"})
    graph, _ = import_graph(pkg)
    assert layer_violations(graph, {"top"}, {"cmd"}) == [
        "module below the commands deep imports command cmd",
        "module below the commands low imports top"]


def test_cycles_are_seen(tmp_path: Path) -> None:
    pkg = write_package(tmp_path, {"a": "from . import b", "b": "def f():\n    from .c import g\n",
                                   "c": "from .a import x", "d": "from . import a", "e": ""})
    graph, _ = import_graph(pkg)
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": {"x"}, "z": set()}) == [["x", "y"]]


def test_private_names_across_modules_are_seen(tmp_path: Path) -> None:
    pkg = write_package(tmp_path, {"a": "from .b import _hidden, shown\n",
                                   "c": "from . import b as bb\nbb._hidden()\nbb.__name__\n",
                                   "b": "def _hidden(): pass\ndef shown(): _hidden()\n"})
    _, private = import_graph(pkg)
    assert private == {"a": ["from b import _hidden"], "c": ["b._hidden (line 2)"]}


# --- the suite knows nothing of the driver (issue 32) ------------------------------------

REPO = KUNIT_DIR.parent.parent
SUITE = REPO / "lib" / "kunit-cgroup"


def driver_words(repo: Path = REPO) -> re.Pattern[str]:
    """What names this repository's driver in a text: its package and folder, `make <target>`
    of the top Makefile's targets, its documents and check lists, its profiles by name, and
    "the driver". (The suite speaks of the kernel, and of a tool reading its console.)"""
    targets = "|".join(re.findall(r"^([a-z][\w-]*):", (repo / "Makefile").read_text(), re.M))
    profiles = "|".join(p.stem for p in (repo / "tools" / "kunit" / "profiles").glob("*.config"))
    assert "run" in targets.split("|") and "um-lockdep" in profiles.split("|")
    words = [r"cgkunit", r"tools/kunit", r"results\.md", r"README", r"checks\.json",
             r"bench\.json", r"\bthe driver\b", rf"\bmake (?:{targets})\b",
             rf"(?<![\w-])(?:{profiles})(?![\w-])"]
    return re.compile("|".join(words), re.IGNORECASE)


def driver_mentions(suite: Path, words: re.Pattern[str]) -> list[str]:
    """Each line of the suite's files (sources, headers, Kconfig, Makefile) naming the driver,
    as file:line: text."""
    return [f"{path.name}:{n}: {line.strip()}"
            for path in sorted(p for p in suite.iterdir() if p.is_file())
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if words.search(line)]


def test_the_suite_does_not_mention_the_driver() -> None:
    assert driver_mentions(SUITE, driver_words()) == []


def test_a_mention_of_the_driver_in_the_suite_is_seen(tmp_path: Path) -> None:
    suite = tmp_path / "kunit-cgroup"
    shutil.copytree(SUITE, suite)
    added = {"a.c": " * The driver (cgkunit.py reach) reads these lines.",
             "b.c": " * (tools/kunit/cgkunit/reach.py) has one row for each",
             "Kconfig.b": "\t  run it with make bench, see results.md",
             "Makefile.b": "# built for the x86_64-kasan profile",
             "c.h": "/* each entry of checks.json, as README says */"}
    for name, line in added.items():
        (suite / name).write_text(f"{line}\n")
    assert driver_mentions(suite, driver_words()) == [
        f"{name}:1: {line.strip()}" for name, line in sorted(added.items())]
    # what the suite may say: the kernel's words, and the make of everyday English
    assert not driver_words().search("the flags that make it; make CGK_VICTIM_USER victims exit;"
                                     " kunit.filter_glob=cgroup_migrate_dynmods; the x86_64 kasan")
