"""The course as shipped, whatever the student wrote: what the course's own tests check.

A student fills in the files a lesson ships as stubs: every lesson's `exercises.py`, and
lesson 14's kernel file `layernorm2d.cl` (any `*.cl` in a lesson folder is such a stub). The
course's tests (tests/course/) check those stubs: they fail untouched, they have their
references' signatures. Run in a student's solved clone, they must read the stubs as shipped,
never the solutions, or the project's suite turns red the day the student succeeds.

A stub is recognised by what makes it fail: an exercises.py whose every exercise raises
NotImplementedError("lesson N: ..."), a kernel file with `#error "lesson N: ..."`. A solved
file is replaced by its newest version in git's history that still is the stub: HEAD's when
the solutions are not committed, an older commit's when they are.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

from kuiper.core.errors import KuiperError
from kuiper.course.lessons import course_dir, lesson_test_files, lessons, reference_table


def stub_files(folder: Path) -> list[Path]:
    """The files of lesson `folder` that the student writes in: exercises.py and kernels."""
    return [folder / "exercises.py", *sorted(folder.glob("*.cl"))]


def untouched_stub(source: str, names, number: int) -> bool:
    """Whether `source` (an exercises.py) still is the stub: every exercise in `names` is
    defined and raises NotImplementedError("lesson N: ...")."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            texts = [ast.unparse(n.exc) for n in ast.walk(node)
                     if isinstance(n, ast.Raise) and n.exc is not None]
            if any("NotImplementedError" in t and f"lesson {number}:" in t for t in texts):
                found.add(node.name)
    return found == set(names)


def is_stub(path: Path, text: str) -> bool:
    """Whether `text`, the content of lesson file `path`, is that file as shipped."""
    folder = path.parent
    number = int(folder.name.split("_", 1)[0])
    if path.suffix == ".cl":   # it fails to compile, saying which lesson
        return f'#error "lesson {number}:' in text
    names = [name for test in lesson_test_files(folder) for name in reference_table(test)]
    return untouched_stub(text, names, number)


def pristine_text(path: Path) -> str:
    """The text of the stub file at `path` as the course ships it: the file itself while it is
    still the stub, else the newest version in git's history that is."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if is_stub(path, text):
        return text

    def git(*args: str, cwd: Path = path.parent) -> str:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                              text=True).stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel").strip()).resolve()
        relative = path.resolve().relative_to(top).as_posix()   # both git commands want it
        for commit in git("log", "--format=%H", "--", relative, cwd=top).split():
            old = git("show", f"{commit}:{relative}", cwd=top)
            if is_stub(path, old):
                return old
        why = "no commit has it as shipped"
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        why = f"git cannot say: {e}"
    raise KuiperError(f"{path} is solved (or edited) and its stub as shipped was not found "
                      f"({why}): the stubs are only checked in a git checkout of the course")


def pristine_stubs(folder: Path) -> str:
    """The text of lesson `folder`'s exercises.py as the course ships it."""
    return pristine_text(Path(folder) / "exercises.py")


def pristine_copy(destination: Path) -> Path:
    """A copy of the course in `destination` with every lesson's stub files as shipped."""
    destination = Path(destination)
    shutil.copytree(course_dir(), destination,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for folder in lessons().values():
        for path in stub_files(folder):
            (destination / folder.name / path.name).write_text(pristine_text(path),
                                                               encoding="utf-8")
    return destination
