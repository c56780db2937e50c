"""The course's exercises are real tests of something.

- Every lesson has notes, stubs and tests, and names them as `kuiper course` expects.
- Every stub has its reference's signature (parameter names, kinds, defaults).
- Against the UNTOUCHED stubs, every lesson's tests fail, with NotImplementedError naming the
  lesson (run in a subprocess in student mode, as `kuiper course check` does).
The stubs are read from a pristine copy of the course (the `pristine_course` fixture: git's
copy of an exercises.py the student has solved), so solving the course never fails these.
(The same tests passing against the framework's references is the `course_notes` entry of
pytest's testpaths: they run with the rest of the suite.)
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kuiper.course.lessons import (
    ENV,
    lesson_test_files,
    lessons,
    reference_table,
    resolve,
    signature_problems,
)
from kuiper.course.pristine import stub_files

ROOT = Path(__file__).resolve().parents[2]
LESSONS = lessons()


def test_the_lessons_are_numbered_without_gaps():
    assert sorted(LESSONS) == list(range(1, len(LESSONS) + 1)) and len(LESSONS) >= 11


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_lesson_layout(number):
    folder = LESSONS[number]
    assert (folder / "notes.md").is_file() and (folder / "exercises.py").is_file()
    files = lesson_test_files(folder)
    assert [f.name for f in files] == [f"test_lesson{number:02d}.py"]
    table = reference_table(files[0])
    assert table, f"{files[0]} has an empty REFERENCE table"
    for name, target in table.items():
        assert resolve(target) is not None, f"{name}: {target} does not resolve"
    lines = len((folder / "notes.md").read_text().splitlines())
    assert 100 <= lines <= 250, f"{folder.name}/notes.md has {lines} lines"


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_every_stub_has_its_references_signature(number, pristine_course):
    assert signature_problems(pristine_course / LESSONS[number].name) == []


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_every_stub_raises_not_implemented_naming_its_lesson(number, pristine_course):
    """Statically: each exercise function (or method) body raises
    NotImplementedError("lesson N...")."""
    folder = pristine_course / LESSONS[number].name
    tree = ast.parse((folder / "exercises.py").read_text())
    names = set(reference_table(lesson_test_files(folder)[0]))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            raises = [n for n in ast.walk(node) if isinstance(n, ast.Raise)]
            texts = [ast.unparse(r.exc) for r in raises if r.exc is not None]
            assert any("NotImplementedError" in t and f"lesson {number}:" in t for t in texts), (
                f"{folder.name}/exercises.py: {node.name} should raise "
                f"NotImplementedError('lesson {number}: ...')")
            found.add(node.name)
    assert found == names


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_every_kernel_stub_stops_the_compiler_naming_its_lesson(number, pristine_course):
    """A kernel file a lesson ships (lesson 14's layernorm2d.cl) fails to build untouched,
    with a message that says which lesson (the pristine copy restores a solved one)."""
    folder = pristine_course / LESSONS[number].name
    for kernel in stub_files(folder)[1:]:
        assert f'#error "lesson {number}:' in kernel.read_text(), \
            f'{folder.name}/{kernel.name} should stop the build: #error "lesson {number}: ..."'


def test_the_test_files_have_unique_names():
    names = [f.name for folder in LESSONS.values() for f in lesson_test_files(folder)]
    assert len(names) == len(set(names))


@pytest.fixture(scope="module")
def student_run(tmp_path_factory, pristine_course):
    """All lessons' tests against the untouched stubs, in one student-mode subprocess."""
    report = tmp_path_factory.mktemp("student") / "junit.xml"
    env = dict(os.environ, **{ENV: "student"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(pristine_course), "-q", "-p",
         "no:cacheprovider", "-o", "addopts=", "-W", "ignore", f"--junitxml={report}"],
        cwd=pristine_course, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, ET.parse(report).getroot()


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_untouched_stubs_fail_with_not_implemented_naming_the_lesson(student_run, number):
    proc, root = student_run
    assert proc.returncode != 0
    folder = LESSONS[number].name
    cases = [c for c in root.iter("testcase") if f".{folder}." in f".{c.get('classname')}."]
    assert cases, f"no test of {folder} ran in student mode"
    skipped = [p for c in cases for p in list(c) if p.tag == "skipped"]
    if len(skipped) == len(cases):   # e.g. an OpenCL lesson on a machine without OpenCL
        pytest.skip(f"{folder}: every test skipped: {skipped[0].get('message')}")
    problems = [p for c in cases for p in list(c) if p.tag in ("failure", "error")]
    assert problems, f"{folder}: every test passed against the untouched stubs"
    texts = [(p.get("message") or "") + (p.text or "") for p in problems]
    assert any("NotImplementedError" in t and f"lesson {number}:" in t for t in texts), (
        f"{folder}: no failure mentions NotImplementedError for lesson {number}:\n"
        + "\n".join(t[:200] for t in texts[:3]))
    passed = [c for c in cases if not any(p.tag in ("failure", "error", "skipped")
                                          for p in list(c))]
    assert len(passed) < len(cases) / 2, (
        f"{folder}: {len(passed)} of {len(cases)} tests pass against the stubs; "
        "they should test the exercises")
