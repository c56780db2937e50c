"""The course as shipped is found again however the student solved it (kuiper/course/pristine.py):
solutions left uncommitted, solutions committed, kernel files included."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kuiper.core.errors import KuiperError
from kuiper.course.lessons import lessons
from kuiper.course.pristine import pristine_copy, pristine_text, stub_files

STUB = 'def f(x):\n    raise NotImplementedError("lesson 1: write f")\n'
SOLVED = "def f(x):\n    return x\n"
KERNEL = '// write it\n#error "lesson 1: write the kernel"\n'
KERNEL_SOLVED = "__kernel void k(__global float *x) { x[0] = 1.0f; }\n"


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=s", "-c", "user.email=s@example.com", *args],
                   cwd=cwd, check=True, capture_output=True, text=True)


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A one-lesson course, committed as shipped, in a git repository of its own."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: a student's clone needs it")
    lesson = tmp_path / "clone" / "course_notes" / "01_first"
    lesson.mkdir(parents=True)
    (lesson / "notes.md").write_text("# Lesson 1\n")
    (lesson / "exercises.py").write_text(STUB)
    (lesson / "test_lesson01.py").write_text('REFERENCE = {"f": "operator:pos"}\n')
    (lesson / "kernel.cl").write_text(KERNEL)
    git(tmp_path / "clone", "init", "-q")
    git(tmp_path / "clone", "add", ".")
    git(tmp_path / "clone", "commit", "-q", "-m", "as shipped")
    monkeypatch.setenv("KUIPER_COURSE_DIR", str(lesson.parent))
    return lesson


def solve(lesson):
    (lesson / "exercises.py").write_text(SOLVED)
    (lesson / "kernel.cl").write_text(KERNEL_SOLVED)


def test_the_stub_files_are_the_exercises_and_the_kernels():
    assert [p.name for p in stub_files(lessons()[14])] == ["exercises.py", "layernorm2d.cl"]
    assert [p.name for p in stub_files(lessons()[4])] == ["exercises.py"]


@pytest.mark.parametrize("committed", [False, True], ids=["uncommitted", "committed"])
def test_a_solved_lesson_is_copied_as_shipped(course, tmp_path, committed):
    solve(course)
    if committed:   # the student committed the solutions: HEAD is no longer the stub
        git(course, "commit", "-q", "-am", "solved")
    copy = pristine_copy(tmp_path / "copy") / course.name
    assert (copy / "exercises.py").read_text() == STUB
    assert (copy / "kernel.cl").read_text() == KERNEL
    assert (copy / "notes.md").read_text() == "# Lesson 1\n"
    assert (course / "exercises.py").read_text() == SOLVED, "the student's file is untouched"


def test_an_untouched_stub_is_read_from_the_file_itself(course):
    assert pristine_text(course / "exercises.py") == STUB
    assert pristine_text(course / "kernel.cl") == KERNEL


def test_a_stub_git_never_had_is_a_clear_error(course):
    (course / "other.cl").write_text(KERNEL_SOLVED)   # never committed as a stub
    with pytest.raises(KuiperError, match="other.cl is solved .* not found"):
        pristine_text(course / "other.cl")
