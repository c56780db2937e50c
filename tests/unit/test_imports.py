"""How the code imports itself: one namespace, dependencies that point one way, no cycles.

The four top folders install as one package (pyproject.toml, package-dir):

    kuiper/ -> kuiper     layers/ -> kuiper.layers     parser/ -> kuiper.parser
    clkernels/ -> kuiper.clkernels

These tests read every import statement of the repository (module level, inside functions and
under TYPE_CHECKING alike) with `ast`, resolve it to a file through that mapping, and check the
promises of the layout:

- nobody imports a bare `layers`, `parser` or `clkernels` (they would collide with a user's own
  `layers.py` or `parser/`, and would load the code twice under two names);
- the parser, the bottom layer, imports nothing of the rest of Kuiper;
- no file imports itself through a loop of other files.

Folder-level rules (the floors of kuiper/DESIGN.md) are test_floors.py's.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"kuiper": "kuiper", "kuiper.layers": "layers", "kuiper.parser": "parser",
           "kuiper.clkernels": "clkernels"}
BARE = ("layers", "parser", "clkernels")


def source_files() -> list[Path]:
    """Every Python file of the package folders, the tests and the course."""
    files = []
    for folder in ("kuiper", "layers", "parser", "clkernels", "tests", "course_notes"):
        files += [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def module_of(path: Path) -> str | None:
    """The dotted name a package file is imported as (None for tests and the course)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    for name, folder in FOLDERS.items():
        if parts[0] == folder:
            dotted = name.split(".") + parts[1:]
            return ".".join(dotted[:-1] if dotted[-1] == "__init__" else dotted)
    return None


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_of(path) or ""
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from kuiper.layers.cpu import relu` imports the module kuiper.layers.cpu.relu;
            # `from kuiper.core.ir import Observer` imports kuiper.core.ir, for a name defined there
            for alias in node.names:
                module = f"{base}.{alias.name}"
                found.append((node.lineno, module if file_of(module) else base))
    return found


def file_of(module: str) -> Path | None:
    """The repository file that `module` names, or None (stdlib, numpy, a class name...)."""
    for name in sorted(FOLDERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            rest = module[len(name):].strip(".").split(".") if module != name else []
            base = ROOT / FOLDERS[name] / Path(*rest) if rest else ROOT / FOLDERS[name]
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    return candidate
            return None
    return None


def import_graph() -> dict[Path, set[Path]]:
    graph: dict[Path, set[Path]] = {}
    for path in source_files():
        if module_of(path) is None:
            continue
        targets = {file_of(m) for _, m in imported_names(path)}
        graph[path] = {t for t in targets if t is not None and t != path}
    return graph


def test_no_bare_top_level_imports_in_code_tests_or_course():
    bad = []
    for path in source_files():
        for line, module in imported_names(path):
            if module.split(".")[0] in BARE:
                bad.append(f"{path.relative_to(ROOT)}:{line}: import {module}")
    assert not bad, "import these as kuiper.layers / kuiper.parser / kuiper.clkernels:\n" + \
        "\n".join(bad)


def test_no_bare_top_level_imports_in_notes_readme_and_docstrings():
    # also docstring examples (`>>> from ...`) of the code, which the AST test cannot see
    pattern = re.compile(r"^\s*(>>>\s*)?(from|import)\s+(layers|parser|clkernels)\b", re.M)
    docs = [ROOT / "README.md", *ROOT.glob("course_notes/**/*.md"), *ROOT.glob("kuiper/**/*.md"),
            *ROOT.glob("layers/**/*.md"), *ROOT.glob("parser/**/*.md"), *source_files()]
    bad = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in docs
           for m in pattern.finditer(p.read_text())]
    assert not bad, "\n".join(bad)


def test_the_parser_imports_nothing_of_the_rest_of_kuiper():
    bad = []
    for path in (ROOT / "parser").rglob("*.py"):
        for line, module in imported_names(path):
            target = file_of(module)
            if target is not None and not target.is_relative_to(ROOT / "parser"):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not bad, "parser/ is the bottom layer; it must not import:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = import_graph()
    # Tarjan's strongly connected components: a component of 2+ files is a cycle.
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    cycles: list[list[Path]] = []

    def visit(v: Path) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
                cycles.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    text = ["  " + " <-> ".join(str(p.relative_to(ROOT)) for p in c) for c in cycles]
    assert not cycles, "files that import each other in a loop:\n" + "\n".join(text)


def test_the_checker_sees_the_imports():
    """The resolver above must find real arrows, or the cycle test would pass vacuously."""
    graph = import_graph()
    relu = ROOT / "layers" / "cpu" / "relu.py"
    assert ROOT / "layers" / "base.py" in graph[relu]
    assert ROOT / "kuiper" / "core" / "registry.py" in graph[relu]
    assert ROOT / "parser" / "values.py" in graph[ROOT / "kuiper" / "graph" / "runtime_graph.py"]


def this_checkout() -> dict[str, str]:
    """The environment for a child Python that imports this checkout's Kuiper, whatever copy
    of it may be installed."""
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def test_a_checkout_uses_its_own_folders():
    """kuiper/ of a checkout finds layers/, parser/ and clkernels/ beside it, even when another
    checkout is installed editable (the install's mapping would point there)."""
    import kuiper
    import kuiper.clkernels
    import kuiper.layers
    import kuiper.parser

    home = Path(kuiper.__file__).resolve().parents[1]
    for package in (kuiper.layers, kuiper.parser, kuiper.clkernels):
        assert Path(package.__file__).resolve().parents[1] == home, package.__file__


def test_kuiper_imports_beside_a_users_own_layers_and_parser(tmp_path):
    """A user's script in a folder with its own layers.py and parser/ still gets Kuiper's."""
    (tmp_path / "layers.py").write_text("raise ImportError('the user layers.py was imported')\n")
    (tmp_path / "parser").mkdir()
    (tmp_path / "parser" / "__init__.py").write_text("raise ImportError('user parser/')\n")
    (tmp_path / "clkernels.py").write_text("raise ImportError('user clkernels.py')\n")
    script = tmp_path / "use_kuiper.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import kuiper
        from kuiper.demo import DIGITS_PARAM

        graph = kuiper.load(DIGITS_PARAM)
        x = np.zeros(graph.inputs[0].shape, np.float32)
        print("ok", graph(x).shape, len(kuiper.core.registry.supported("cpu")))
    """))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=this_checkout(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok"), result.stdout


@pytest.mark.parametrize("name", BARE)
def test_the_folders_are_not_top_level_packages_of_the_install(name, tmp_path):
    """Installed, only `kuiper` is a top-level name: `import layers` finds nothing of ours."""
    code = (f"import importlib.util, kuiper; spec = importlib.util.find_spec({name!r}); "
            "print(spec.origin if spec else None)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    origin = result.stdout.strip()
    assert origin == "None" or not origin.startswith(str(ROOT)), origin
