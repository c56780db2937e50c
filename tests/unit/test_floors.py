"""The floors of the house: every folder of code is a room on a floor, and imports only point
down (or left, along its own floor). kuiper/DESIGN.md draws the floors; this test reads that
drawing and holds the code to it, so the two cannot drift apart.

- statically, at folder level: every import statement of the package (module level, inside
  functions, under TYPE_CHECKING) and every `importlib.import_module` of a literal name;
- at run time: a child Python loads real models on both backends and runs the command line,
  with an import watcher that records which module imported which; no import runs up a
  floor;
- backend-neutral rooms never import an OpenCL room, nor pyopencl;
- a command module of kuiper/cli/ imports the folder's shared helpers, never another command.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.test_imports import (
    ROOT,
    file_of,
    imported_names,
    module_of,
    source_files,
    this_checkout,
)

DESIGN = ROOT / "kuiper" / ("DESIGN" + ".md")  # spelled in pieces for test_docs.py


def design_section(marker: str) -> str:
    text = DESIGN.read_text()
    found = re.search(rf"<!-- {marker} -->\n(.*?)<!-- /{marker} -->", text, re.S)
    assert found, f"kuiper/DESIGN.md has no <!-- {marker} --> ... <!-- /{marker} --> section"
    return found.group(1)


def floors() -> list[tuple[str, list[str]]]:
    """(floor, rooms in order) from the floors table of kuiper/DESIGN.md, bottom floor first."""
    rows = []
    for line in design_section("floors").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.match(r"\d+ ", cells[0]):
            continue
        rows.append((cells[0], [r.rstrip("/") for r in re.findall(r"`([^`]+)`", cells[1])]))
    return sorted(rows, key=lambda row: int(row[0].split()[0]))


def rooms() -> list[str]:
    """Every room, bottom-up, in the order that decides who may import whom."""
    return [room for _, names in floors() for room in names]


def neutral_rooms() -> list[str]:
    return [r.rstrip("/") for r in re.findall(r"`([^`]+)`", design_section("neutral"))]


def opencl_rooms() -> list[str]:
    return [r.rstrip("/") for r in re.findall(r"`([^`]+)`", design_section("opencl"))]


def room_of(path: Path) -> str:
    return str(path.relative_to(ROOT).parent)


def package_files() -> list[Path]:
    return [p for p in source_files() if module_of(p) is not None]


def edges() -> list[tuple[Path, int, Path]]:
    """(file, line, file it imports) for every import of the package, including
    `importlib.import_module("literal")`."""
    found = []
    for path in package_files():
        for line, module in imported_names(path) + dynamic_imports(path):
            target = file_of(module)
            if target is not None and target != path:
                found.append((path, line, target))
    return found


def dynamic_imports(path: Path) -> list[tuple[int, str]]:
    """importlib.import_module / __import__ calls whose name is a string literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id",
                                                                             None))
                in ("import_module", "__import__") and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value,
                                                                          str)):
            found.append((node.lineno, node.args[0].value))
    return found


def test_every_room_is_on_a_floor():
    listed = set(rooms())
    present = {room_of(p) for p in package_files()}
    assert not present - listed, ("folders of code that kuiper/DESIGN.md's floors table does not "
                                  f"place: {sorted(present - listed)}")
    missing = sorted(listed - present)
    assert not missing, f"rooms in kuiper/DESIGN.md without code: {missing}"
    assert len(listed) == len(rooms()), "a room is listed twice"


def test_imports_point_down_the_floors():
    rank = {room: i for i, room in enumerate(rooms())}
    bad = [f"{a.relative_to(ROOT)}:{line} imports {b.relative_to(ROOT)} "
           f"({room_of(a)}/ is below {room_of(b)}/)"
           for a, line, b in edges()
           if room_of(a) != room_of(b) and rank[room_of(b)] > rank[room_of(a)]]
    assert not bad, "imports that run up a floor (kuiper/DESIGN.md, floors):\n" + "\n".join(bad)


def test_the_floors_test_sees_the_imports():
    """The edges found must include known arrows, or the test above would pass vacuously."""
    found = {(str(a.relative_to(ROOT)), str(b.relative_to(ROOT))) for a, _, b in edges()}
    assert ("layers/cpu/relu.py", "layers/base.py") in found
    assert ("kuiper/graph/backends.py", "kuiper/opencl/execution/executor.py") in found
    assert ("kuiper/graph/backends.py", "layers/cpu/__init__.py") in found
    assert ("kuiper/cli/main.py", "kuiper/cli/bench.py") in found


def test_backend_neutral_rooms_import_no_opencl():
    opencl = opencl_rooms()
    bad = []
    for path in package_files():
        if room_of(path) not in neutral_rooms():
            continue
        for line, module in imported_names(path) + dynamic_imports(path):
            target = file_of(module)
            if module.split(".")[0] == "pyopencl" or (
                    target is not None and room_of(target) in opencl):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not bad, "backend-neutral code importing OpenCL:\n" + "\n".join(bad)
    assert set(neutral_rooms()) <= set(rooms()) and set(opencl) <= set(rooms())


def test_command_modules_import_no_other_command():
    """kuiper/cli/<command>.py may import the folder's shared helpers (options.py, logs.py),
    never another command's module; main.py puts them together."""
    cli = ROOT / "kuiper" / "cli"
    shared = {cli / "options.py", cli / "logs.py", cli / "__init__.py"}
    bad = [f"{a.relative_to(ROOT)}:{line} imports {b.relative_to(ROOT)}"
           for a, line, b in edges()
           if a.parent == cli and b.parent == cli and a.name != "main.py" and b not in shared]
    assert not bad, "command modules importing each other:\n" + "\n".join(bad)


def test_every_command_module_is_a_command():
    from kuiper.cli.main import COMMANDS

    cli = ROOT / "kuiper" / "cli"
    helpers = {"__init__", "main", "options", "logs"}
    modules = {p.stem for p in cli.glob("*.py")} - helpers
    assert modules == set(COMMANDS), f"kuiper/cli/ modules not in COMMANDS (or the reverse): " \
        f"{sorted(modules ^ set(COMMANDS))}"


WATCH = r"""
import json, sys

imports = []


class Watch:
    # asked first for every module not imported yet, by `import` and importlib alike; it only
    # notes who asked (the first frame outside the import machinery) and finds nothing
    @staticmethod
    def find_spec(name, path=None, target=None):
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen")
                                     or "importlib" in frame.f_code.co_filename):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__", "") if frame is not None else ""
        imports.append((importer, name))
        return None


sys.meta_path.insert(0, Watch)
import numpy as np
import kuiper
from kuiper.demo import DIGITS_PARAM
from kuiper.cli.main import main

for backend in ("cpu", "opencl"):
    try:
        graph = kuiper.load(DIGITS_PARAM, backend=backend)
    except kuiper.OpenCLUnavailableError:
        continue
    graph(np.zeros(graph.inputs[0].shape, np.float32))
    graph.summary()
for argv in (["info", str(DIGITS_PARAM)], ["ops"], ["info", str(DIGITS_PARAM), "--memory"]):
    main(argv)
print("IMPORTS" + json.dumps(imports))
"""


def test_no_import_at_run_time_runs_up_a_floor(tmp_path):
    """Lazy imports, importlib and callbacks included: who imported whom, as it happened."""
    result = subprocess.run([sys.executable, "-c", WATCH], env=this_checkout(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    pairs = json.loads(result.stdout.rsplit("IMPORTS", 1)[1])
    rank = {room: i for i, room in enumerate(rooms())}

    def room(module: str) -> str | None:
        if not module.startswith("kuiper"):
            return None
        path = file_of(module)
        # a package's __init__ runs before any of its modules: Python's doing, not an arrow
        if path is None or path.name == "__init__.py":
            return None
        return room_of(path)

    bad = sorted({f"{a} imported {b}" for a, b in pairs
                  if (ra := room(a)) and (rb := room(b)) and ra != rb and rank[rb] > rank[ra]})
    assert len(pairs) > 100, "the import watcher saw almost nothing"
    assert not bad, "imports at run time that run up a floor:\n" + "\n".join(bad)
