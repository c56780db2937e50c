"""What the lessons say about their exercises is what the exercises and their tests do.

Each of these was once wrong: a number in a docstring that the test did not use, a docstring
that did not say which module to import, a ReLU exercise that accepted NaN -> 0, a profiling
exercise checked on made-up timings.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kuiper.course.lessons import lessons
from kuiper.course.pristine import pristine_stubs

ROOT = Path(__file__).resolve().parents[2]
LESSONS = lessons()


def module_constant(path: Path, name: str):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} has no {name} = ...")


def test_lesson4_states_the_chain_length_its_test_uses():
    folder = LESSONS[4]
    length = module_constant(folder / "test_lesson04.py", "CHAIN_LENGTH")
    stated = f"{length:,}-operator"
    assert stated in pristine_stubs(folder), f"exercises.py should say {stated}"
    assert stated in " ".join((folder / "notes.md").read_text().split())
    for text in (pristine_stubs(folder), (folder / "notes.md").read_text()):
        for number in re.findall(r"([\d,]+)-operator", text):
            assert number == f"{length:,}", f"lesson 4 says a {number}-operator chain"


def docstring_imports(source: str) -> list[tuple[str, list[str]]]:
    """`from kuiper.x import a, b` lines written in the docstrings of an exercises.py."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)):
            doc = ast.get_docstring(node) or ""
            for module, names in re.findall(r"from (kuiper[\w.]*) import ([\w, ]+)", doc):
                found.append((module, [n.strip() for n in names.split(",")]))
    return found


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_imports_named_in_the_exercises_work(number):
    for module, names in docstring_imports(pristine_stubs(LESSONS[number])):
        imported = importlib.import_module(module)
        for name in names:
            assert hasattr(imported, name), f"lesson {number}: {module} has no {name}"


def test_lesson7_names_the_module_of_every_table_it_fills():
    """`evaluate` is both a module and the function the package re-exports: the docstring must
    say which module holds NUMPY and PYTHON_BINARY, and the same for every other table."""
    imports = dict(docstring_imports(pristine_stubs(LESSONS[7])))
    wanted = {"kuiper.parser.expression.functions": "FUNCTIONS",
              "kuiper.parser.expression.evaluate": "NUMPY",
              "kuiper.parser.expression.tokenizer": "tokenize"}
    for module, table in wanted.items():
        assert table in imports.get(module, []), f"lesson 7 should show from {module} import " \
            f"{table}"
    assert "PYTHON_BINARY" in imports["kuiper.parser.expression.evaluate"]


def test_lesson11_times_real_runs():
    """No made-up timings: the tests load real models and spy on what they measure."""
    tree = ast.parse((LESSONS[11] / "test_lesson11.py").read_text())
    classes = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    assert not [c for c in classes if c.startswith("Fake")], classes
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "kuiper.load" in calls


FMAX_RELU = '''
def relu_source():
    return """
__kernel void relu(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n) y[i] = fmax(x[i], 0.0f);
}
"""
'''


def test_lesson9_refuses_a_relu_that_turns_nan_into_zero(tmp_path, pristine_course):
    """fmax(NaN, 0) is 0 in OpenCL, NaN in PyTorch: such a kernel must fail lesson 9."""
    from kuiper.course.lessons import require_opencl

    require_opencl()
    course = tmp_path / "course_notes"
    shutil.copytree(pristine_course / LESSONS[9].name, course / LESSONS[9].name)
    (course / LESSONS[9].name / "exercises.py").write_text(FMAX_RELU)
    env = dict(os.environ, KUIPER_COURSE_DIR=str(course))
    env.pop("KUIPER_COURSE_IMPL", None)
    proc = subprocess.run([sys.executable, "-m", "kuiper", "course", "check", "9"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "test_relu_keeps_nan_and_infinities" in proc.stdout
    assert "got 0, expected nan" in proc.stdout, proc.stdout[-3000:]
    assert "NotImplementedError" not in proc.stdout


# Kernels that compile and write 1234.0f everywhere: the "inside the real layer" tests of
# lessons 9 and 10 must catch them on every device (once, neither did: the demo's ReLUs were
# all fused into epilogues, and on a CPU device MaxPool bound another kernel, maxpool_runs).
WRONG_KERNELS = {
    9: ("relu_source", "test_relu_kernel_inside_a_model", """
__kernel void relu(__global const float *x, __global float *y, const int n)
{
    const int i = get_global_id(0);
    if (i < n) y[i] = 1234.0f;
}
"""),
    10: ("maxpool_source", "test_maxpool_kernel_inside_the_real_layer", """
__kernel void maxpool(__global const float *x, __global float *y, const int n, const int H,
                      const int W, const int OH, const int OW, const int kh, const int kw,
                      const int sh, const int sw, const int ph, const int pw, const int dh,
                      const int dw)
{
    const int i = get_global_id(0);
    if (i < n) y[i] = 1234.0f;
}
"""),
}


@pytest.mark.parametrize("number", sorted(WRONG_KERNELS))
def test_the_model_tests_run_the_students_kernel(number, tmp_path, pristine_course):
    """A wrong kernel fails the lesson's model test, not only its kernel tests."""
    from kuiper.course.lessons import require_opencl

    require_opencl()
    name, test, kernel = WRONG_KERNELS[number]
    course = tmp_path / "course_notes"
    shutil.copytree(pristine_course / LESSONS[number].name, course / LESSONS[number].name)
    (course / LESSONS[number].name / "exercises.py").write_text(
        f"def {name}():\n    return {kernel!r}\n")
    env = dict(os.environ, KUIPER_COURSE_DIR=str(course))
    env.pop("KUIPER_COURSE_IMPL", None)
    proc = subprocess.run([sys.executable, "-m", "kuiper", "course", "check", str(number),
                           "--", "-k", test], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "1 failed" in proc.stdout and "demo model logits" in proc.stdout, proc.stdout[-3000:]


def reference_files(number: int) -> set[str]:
    """The names of the files that hold lesson `number`'s answers (its REFERENCE table)."""
    from kuiper.course.lessons import lesson_test_files, reference_table

    names = set()
    for target in reference_table(lesson_test_files(LESSONS[number])[0]).values():
        if target.endswith(".cl"):
            names.add(Path(target).name)
        else:
            names.add(Path(importlib.import_module(target.partition(":")[0]).__file__).name)
    return names


@pytest.mark.parametrize("number", sorted(LESSONS))
def test_every_stub_says_plainly_where_its_answers_are(number):
    """A stub that sends the student to a file for a helper must not leave them to find the
    answer there unwarned: each exercises.py names the files that hold its answers."""
    doc = " ".join((ast.get_docstring(ast.parse(pristine_stubs(LESSONS[number]))) or "").split())
    assert "answer" in doc, f"lesson {number}: exercises.py should say where the answers are"
    missing = sorted(name for name in reference_files(number) if name not in doc)
    assert not missing, f"lesson {number}: exercises.py never names {missing}, which hold " \
        "its answers"


def design_floors() -> list[tuple[str, list[str]]]:
    """("N name", rooms left to right) of kuiper/DESIGN.md's floors table, top floor first
    (read from the installed package's copy: this test also runs in a student's clone)."""
    import kuiper

    # spelled in pieces: tests/unit/test_docs.py refuses a design document named bare
    text = (Path(kuiper.__file__).parent / ("DESIGN" + ".md")).read_text()
    table = re.search(r"<!-- floors -->\n(.*?)<!-- /floors -->", text, re.S).group(1)
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.match(r"\d+ ", cells[0]):
            rows.append((cells[0], re.findall(r"`([^`]+/)`", cells[1])))
    return rows


FLOOR_COLUMN = 17  # lesson 1's drawing: the floor's name, then its rooms from this column


def lesson1_floors() -> list[tuple[str, list[str]]]:
    """The same, from the drawing under "The map of the repository" in lesson 1's notes: a
    floor's name in the first column (over one or more lines), then its rooms, each ending in
    "/"; a description on the lines indented further."""
    notes = (LESSONS[1] / "notes.md").read_text()
    section = notes[notes.index("## The map of the repository"):]
    drawing = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    rows: list[tuple[str, list[str]]] = []
    for line in drawing.splitlines()[1:]:   # the first line is the header
        name, rest = line[:FLOOR_COLUMN].strip(), line[FLOOR_COLUMN:]
        if re.match(r"\d+ ", name):
            rows.append((name, []))
        elif name and rows:                 # a floor name that goes on over two lines
            rows[-1] = (f"{rows[-1][0]} {name}", rows[-1][1])
        if rows and not rest.startswith(" "):   # rooms, not a description
            rows[-1][1].extend(t for t in rest.split() if t.endswith("/"))
    return rows


def test_lesson1_draws_the_floors_of_the_design():
    """Lesson 1's map of the repository is kuiper/DESIGN.md's floors table: the same floors, the
    same rooms, in the same order (a room added to the house must be drawn there too)."""
    drawn, designed = lesson1_floors(), design_floors()
    assert [name for name, _ in drawn] == [name for name, _ in designed], \
        "lesson 1 names other floors than kuiper/DESIGN.md"
    for (name, rooms), (_, want) in zip(drawn, designed):
        assert rooms == want, f"floor {name}: lesson 1 draws {rooms}, kuiper/DESIGN.md has " \
            f"{want}"
