"""A student who has solved every exercise still has a green test suite.

A clone of the course as shipped (its lessons, every stub as shipped even where this checkout's
own are solved, and tests/course, committed in a git repository of its own, as a student's
clone is) gets every stub file solved: each exercises.py, and the kernel files (lesson 14's
layernorm2d.cl). The course's tests then run in it: the stub checks must read the stubs as
shipped, never the solutions. (test_notes.py is left out: the notes never read the stubs,
and their model exports take a minute.) The normal run leaves out the course's `slow` tests
(whole models: the OCR capstone on both backends) and the tests that read none of the
student's files (the course command, the lessons' claims, the figures), which the suite runs
anyway in reference mode; `python -m pytest -m campaign` runs the solved course whole.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kuiper.course.lessons import lesson_test_files, lessons, reference_table
from kuiper.course.pristine import pristine_copy, stub_files

ROOT = Path(__file__).resolve().parents[2]
# The answer to each kernel file a lesson ships as a stub (a solved student's file).
KERNEL_ANSWERS = {"layernorm2d.cl": ROOT / "kuiper" / "examples" / "layernorm2d" / "layernorm2d.cl"}


def solution(folder: Path) -> str:
    """A solved exercises.py: each exercise is the framework's own function (a kernel
    exercise returns the kernel file's text)."""
    lines = ['"""Solved (by importing the answers)."""', ""]
    for test in lesson_test_files(folder):
        for name, target in reference_table(test).items():
            if target.endswith(".cl"):
                lines += ["", f"def {name}():", "    from kuiper import clkernels", "",
                          f"    return clkernels.source({Path(target).stem!r})", ""]
            else:
                module, _, attr = target.partition(":")
                lines.append(f"from {module} import {attr} as {name}  # noqa: E402, F401")
    return "\n".join(lines) + "\n"


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=student", "-c", "user.email=student@example.com",
                    *args], cwd=cwd, check=True, capture_output=True, text=True)


@pytest.mark.slow  # a nested pytest over every lesson (minutes)
@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.campaign)],
                         ids=["quick", "whole"])
def test_a_solved_course_passes_the_course_tests(tmp_path, whole):
    if shutil.which("git") is None:
        pytest.skip("git is not installed: a student's clone needs it")
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "tests" / "course", clone / "tests" / "course",
                    ignore=shutil.ignore_patterns("__pycache__", "test_solved_course.py"))
    (clone / "tests" / "__init__.py").write_text("")
    course = pristine_copy(clone / "course_notes")   # not this checkout's, maybe solved
    git(clone, "init", "-q")
    git(clone, "add", ".")
    git(clone, "commit", "-q", "-m", "the course as shipped")
    for folder in lessons().values():
        for stub in stub_files(course / folder.name):
            if stub.name == "exercises.py":
                stub.write_text(solution(folder))
            else:
                assert stub.name in KERNEL_ANSWERS, f"{folder.name}/{stub.name}: no answer"
                stub.write_text(KERNEL_ANSWERS[stub.name].read_text())

    env = dict(os.environ, KUIPER_COURSE_DIR=str(course))
    env.pop("KUIPER_COURSE_IMPL", None)
    # this checkout's kuiper, not whichever one is installed: the clone stands for it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    # The quick run: the lessons' own tests and the stub checks, the two that read the
    # student's files; the course's command, claims and figures tests read only Kuiper's
    # (the suite runs them), and the whole run adds them.
    files = ["tests/course/test_exercises.py", "course_notes"]
    if whole:
        files[1:1] = ["tests/course/test_course_cli.py", "tests/course/test_lesson_claims.py",
                      "tests/course/test_figures.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "-W", "ignore", "-m", "campaign or not campaign" if whole else "not slow", *files],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-2000:]
    # and the solutions really are in place: in student mode, lesson 4 passes
    check = subprocess.run([sys.executable, "-m", "kuiper", "course", "check", "4"], cwd=clone,
                           env=env, capture_output=True, text=True, timeout=600, check=False)
    assert check.returncode == 0 and "lesson 4: all exercises pass" in check.stdout, check.stdout
