"""`kuiper course`: check a student's exercises, lesson by lesson.

Each lesson folder `course_notes/NN_name/` holds `notes.md`, `exercises.py` (stubs the student
fills in) and `test_exercises.py`. The tests call `implementation(__file__, REFERENCE)`:

- under `kuiper course check N` (KUIPER_COURSE_IMPL=student) it returns the student's
  `exercises.py`;
- otherwise (the project's own test run) it returns the *framework's* functions named in
  REFERENCE, e.g. {"dfs_iterative": "kuiper.topo:dfs_iterative"}: the solution exists once, in
  the real code, and the same tests prove both that it is right and that they test something.

`check_array` is the comparison the tests use: on a mismatch it reports shape, dtype, the first
differing elements and the max difference, which is what a student needs to find the bug.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np

from kuiper.errors import KuiperError

ENV = "KUIPER_COURSE_IMPL"


def course_dir() -> Path:
    """course_notes/ of the checkout Kuiper runs from (an editable install of a clone)."""
    here = Path(__file__).resolve().parents[1] / "course_notes"
    if not here.is_dir():
        raise KuiperError(f"{here} not found: the course lives in the git checkout; clone the "
                          "repository and `pip install -e .` it to follow the lessons")
    return here


def lessons() -> dict[int, Path]:
    found = {}
    for folder in sorted(course_dir().iterdir()):
        head = folder.name.split("_", 1)[0]
        if folder.is_dir() and head.isdigit():
            found[int(head)] = folder
    return found


def student_mode() -> bool:
    return os.environ.get(ENV, "reference") == "student"


def load_exercises(folder: Path) -> types.ModuleType:
    path = folder / "exercises.py"
    spec = importlib.util.spec_from_file_location(f"course_{folder.name}_exercises", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def resolve(target: str):
    """"package.module:attribute" -> the object."""
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def implementation(test_file: str, reference: dict[str, str]) -> types.SimpleNamespace:
    """The functions under test: the student's (student mode) or the framework's."""
    if student_mode():
        module = load_exercises(Path(test_file).resolve().parent)
        return types.SimpleNamespace(**{name: getattr(module, name) for name in reference})
    return types.SimpleNamespace(**{name: resolve(t) for name, t in reference.items()})


def check_array(got, want, what: str = "result", rtol: float = 1e-5, exact: bool = False
                ) -> None:
    """Assert `got` equals `want`; the message says what differs and where."""
    got_a, want_a = np.asarray(got), np.asarray(want)
    if got_a.shape != want_a.shape:
        raise AssertionError(f"{what}: shape {got_a.shape}, expected {want_a.shape}")
    if got_a.dtype != want_a.dtype and (exact or got_a.dtype.kind != want_a.dtype.kind):
        raise AssertionError(f"{what}: dtype {got_a.dtype}, expected {want_a.dtype}")
    if exact or want_a.dtype.kind not in "fc":
        bad = got_a != want_a
        tol = 0.0
    else:
        tol = rtol * max(1.0, float(np.abs(want_a).max()) if want_a.size else 1.0)
        bad = ~(np.abs(got_a.astype(np.float64) - want_a) <= tol)
    if not bad.any():
        return
    where = np.argwhere(bad)[:5]
    rows = "\n".join(f"  at {tuple(int(i) for i in idx)}: got {got_a[tuple(idx)]!r}, "
                     f"expected {want_a[tuple(idx)]!r}" for idx in where)
    diff = ""
    if want_a.dtype.kind in "fiu" and got_a.dtype.kind in "fiu":
        diff = (f", max difference {np.abs(got_a.astype(np.float64) - want_a).max():.4g}"
                f" (tolerance {tol:.2g})")
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ{diff}; "
                         f"first ones:\n{rows}")


def check(number: int, extra: list[str] | None = None) -> int:
    """Run lesson `number`'s tests against the student's exercises.py; returns the exit code."""
    found = lessons()
    if number not in found:
        raise KuiperError(f"no lesson {number}; lessons: "
                          + ", ".join(f"{n} ({p.name})" for n, p in found.items()))
    folder = found[number]
    env = dict(os.environ, **{ENV: "student"})
    cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "--tb=short", "--no-header",
           "-p", "no:cacheprovider", "--rootdir", str(folder), "-W", "ignore"] + (extra or [])
    print(f"checking lesson {number} ({folder.name}) against {folder / 'exercises.py'}")
    code = subprocess.call(cmd, env=env, cwd=folder)
    if code == 0:
        print(f"lesson {number}: all exercises pass")
    else:
        print(f"lesson {number}: not yet (read the first failure above; "
              f"NotImplementedError means the stub is still untouched)")
    return code


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("course", help="list the lessons or check a lesson's exercises")
    course_sub = p.add_subparsers(dest="course_command", required=True)
    course_sub.add_parser("list", help="list the lessons").set_defaults(func=_list_command)
    c = course_sub.add_parser("check", help="run lesson N's tests against your exercises.py")
    c.add_argument("lesson", type=int)
    c.set_defaults(func=lambda args: check(args.lesson))


def _list_command(args: argparse.Namespace) -> int:
    for number, folder in lessons().items():
        title = (folder / "notes.md").read_text().splitlines()[0].lstrip("# ") if (
            folder / "notes.md").exists() else folder.name
        print(f"{number:2d}  {title}")
    return 0
