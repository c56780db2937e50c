"""The course's lessons: where they are, which implementation a lesson's tests get, the comparison
they use, and `check`, what `kuiper course check N` runs (the command is kuiper/cli/course.py).

Each lesson folder `course_notes/NN_name/` holds `notes.md`, `exercises.py` (stubs the student
fills in) and `test_lessonNN.py` (unique names: pytest imports every lesson's tests in one run).
A test file declares `REFERENCE = {"exercise name": "module:attribute", ...}` and calls
`implementation(__file__, REFERENCE)`:

- under `kuiper course check N` (KUIPER_COURSE_IMPL=student) it returns the student's
  `exercises.py`;
- otherwise (the project's own test run) it returns the *framework's* functions named in
  REFERENCE, e.g. {"dfs_iterative": "kuiper.graph.topo:dfs_iterative"}: the solution exists once, in
  the real code, and the same tests prove both that it is right and that they test something.
  A reference may also be a kernel file, "clkernels/relu.cl": the exercise then returns kernel
  source text, and the reference is that file's text.

`check_array` is the comparison the tests use: on a mismatch it reports shape, dtype, the first
differing elements and the max difference, which is what a student needs to find the bug.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

from kuiper.core.errors import KuiperError
from kuiper.course.report import REPORT_ENV

ENV = "KUIPER_COURSE_IMPL"


def course_dir() -> Path:
    """course_notes/ of the checkout Kuiper runs from (an editable install of a clone), or the
    folder named by $KUIPER_COURSE_DIR (a copy of the course elsewhere)."""
    chosen = os.environ.get("KUIPER_COURSE_DIR")
    here = Path(chosen or Path(__file__).resolve().parents[2] / "course_notes")
    if not here.is_dir():
        problem = "is not a folder" if os.path.lexists(here) else "not found"
        where = ("KUIPER_COURSE_DIR should name the course_notes/ folder of a copy of the course"
                 if chosen else "the course lives in the git checkout; clone the repository and "
                 "`pip install -e .` it to follow the lessons")
        raise KuiperError(f"{here} {problem}: {where}")
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
    """"package.module:attribute" -> the object; "clkernels/<stem>.cl" -> a function returning
    that kernel file's source."""
    if target.endswith(".cl"):
        from kuiper import clkernels

        return functools.partial(clkernels.source, Path(target).stem)
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def implementation(test_file: str, reference: dict[str, str]) -> types.SimpleNamespace:
    """The functions under test: the student's (student mode) or the framework's."""
    if student_mode():
        folder = Path(test_file).resolve().parent
        module = load_exercises(folder)
        missing = [name for name in reference if not hasattr(module, name)]
        if missing:
            raise KuiperError(f"{folder.name}/exercises.py should define "
                              f"{', '.join(missing)} (restore the stub from git if you "
                              "deleted it)")
        return types.SimpleNamespace(**{name: getattr(module, name) for name in reference})
    return types.SimpleNamespace(**{name: resolve(t) for name, t in reference.items()})


def require_opencl() -> None:
    """Skip the calling test, saying why, when no OpenCL device can be used."""
    import pytest

    from kuiper.opencl.device.runtime import choose_device

    try:
        choose_device()
    except KuiperError as e:
        pytest.skip(f"no OpenCL device ({e}); `kuiper devices` lists what is installed")


def file_constant(test_file: Path, name: str, default=None):
    """A constant `name = <literal>` of a lesson's test file, read without importing it."""
    tree = ast.parse(Path(test_file).read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == name):
            return ast.literal_eval(node.value)
    return default


def reference_table(test_file: Path) -> dict[str, str]:
    """The REFERENCE dict of a lesson's test file, read without importing it."""
    table = file_constant(test_file, "REFERENCE")
    if table is None:
        raise KuiperError(f"{test_file} has no REFERENCE = {{...}} table")
    return table


def check_time(folder: Path) -> str | None:
    """How long lesson `folder`'s check takes, where that is long enough to say so: the
    CHECK_TIME its test file states ("about a minute"), measured on a 2-core laptop CPU."""
    times = [file_constant(f, "CHECK_TIME") for f in lesson_test_files(folder)]
    return next((t for t in times if t), None)


def lesson_test_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("test_lesson*.py"))


@contextlib.contextmanager
def quiet_output():
    """Hide everything printed inside the block, C++ included; show it if the block fails.

    pnnx prints its passes (and a line per operator it ignores) from C++, straight to the
    process's file descriptors 1 and 2: `contextlib.redirect_stdout` only swaps Python's
    `sys.stdout` and cannot catch it. Pointing the descriptors themselves at a file can.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as log:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace")[-4000:])
            raise
        finally:
            for fd in saved:
                os.close(fd)


def _parameters(obj) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter: what must match between stub and reference
    (annotations may be written differently and still mean the same)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


def signature_problems(folder: Path) -> list[str]:
    """Exercises whose signature differs from the framework's (or that are missing).

    For a class, every method the exercise class defines is compared with the reference's.
    """
    module = load_exercises(folder)
    problems = []
    for test_file in lesson_test_files(folder):
        for name, target in reference_table(test_file).items():
            ref = resolve(target)
            mine = getattr(module, name, None)
            if mine is None:
                problems.append(f"{name}: missing from {folder.name}/exercises.py")
                continue
            pairs = [(name, mine, ref)]
            if inspect.isclass(ref):
                pairs = [(f"{name}.{m}", v, getattr(ref, m, None))
                         for m, v in vars(mine).items() if inspect.isfunction(v)]
            for label, a, b in pairs:
                if b is None:
                    problems.append(f"{label}: the framework's {target} has no such method")
                elif _parameters(a) != _parameters(b):
                    problems.append(f"{label}{inspect.signature(a)} should be "
                                    f"{label}{inspect.signature(b)} (as {target})")
    return problems


def check_array(got, want, what: str = "result", rtol: float = 1e-5, exact: bool = False
                ) -> None:
    """Assert `got` equals `want`; the message says what differs and where.

    Shape first, then dtype (an int where a float is expected is wrong; float32 vs float64 is
    only wrong when `exact`), then values: floats within rtol * max(1, max |want|) (NaN equals
    NaN), everything else exactly. A mismatch lists the first differing elements (index, got,
    expected) and the max difference.
    """
    __tracebackhide__ = True  # pytest: show the test's line, not this function's
    got_a, want_a = np.asarray(got), np.asarray(want)
    if got_a.shape != want_a.shape:
        raise AssertionError(f"{what}: shape {got_a.shape}, expected {want_a.shape} "
                             f"(dtype {got_a.dtype}, expected {want_a.dtype})")
    if got_a.dtype != want_a.dtype and (exact or got_a.dtype.kind != want_a.dtype.kind):
        raise AssertionError(f"{what}: dtype {got_a.dtype}, expected {want_a.dtype}")
    numeric = want_a.dtype.kind in "biuf" and got_a.dtype.kind in "biuf"
    if exact or want_a.dtype.kind not in "fc":
        bad = np.asarray(got_a != want_a)
        tol = 0.0
    else:
        finite = np.abs(want_a[np.isfinite(want_a)])
        tol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
        with np.errstate(invalid="ignore"):
            close = np.abs(got_a.astype(np.float64) - want_a) <= tol
        bad = ~(close | (got_a == want_a) | (np.isnan(got_a) & np.isnan(want_a)))
    if not bad.any():
        return
    where = np.argwhere(bad)[:5]
    rows = "\n".join(f"  at {tuple(int(i) for i in idx)}: got {_show(got_a[tuple(idx)])}, "
                     f"expected {_show(want_a[tuple(idx)])}" for idx in where)
    diff = ""
    if numeric:
        with np.errstate(invalid="ignore"):
            diffs = np.abs(got_a.astype(np.float64) - want_a.astype(np.float64))[bad]
        nan = ", and NaN against a number" if np.isnan(diffs).any() else ""
        worst = np.nanmax(diffs) if not np.isnan(diffs).all() else float("nan")
        diff = f", max difference {worst:.4g} (tolerance {tol:.2g}){nan}"
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ{diff}; "
                         f"first ones:\n{rows}")


def python_blocks(notes: Path) -> list[tuple[int, str]]:
    """The ```python blocks of a Markdown file: (line of the opening fence, code)."""
    blocks, current, start = [], None, 0
    for lineno, line in enumerate(Path(notes).read_text().splitlines(), start=1):
        fence = line.strip()
        if current is None and fence == "```python":
            current, start = [], lineno
        elif current is not None and fence == "```":
            blocks.append((start, "\n".join(current)))
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise KuiperError(f"{notes}, line {start}: a ```python block is never closed")
    return blocks


def run_notes(notes: Path) -> dict:
    """Run every ```python block of `notes` in order, in one namespace, from the repository
    root, as a student pasting them into one Python session would. Tracebacks point at the
    lines of the Markdown file. Returns the namespace."""
    notes = Path(notes).resolve()
    namespace: dict = {"__name__": "__notes__"}
    cwd = os.getcwd()
    os.chdir(Path(__file__).resolve().parents[2])
    try:
        for start, code in python_blocks(notes):
            exec(compile("\n" * start + code, str(notes), "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(cwd)
    return namespace


def _show(value) -> str:
    """One element for a message: floats with float32's 7 significant digits."""
    if isinstance(value, np.floating):
        return f"{float(value):.7g}"
    return repr(value.tolist() if isinstance(value, np.generic) else value)


def require_pytest() -> None:
    """Stop with one clear error when pytest is missing.

    pytest is not a dependency of Kuiper itself but of its `course` extra. Without this check,
    the lesson's pytest run would fail with "No module named pytest", and the hint printed after
    a failed run (about untouched stubs) would send the student looking in the wrong place.
    """
    try:
        import pytest  # noqa: F401 - only whether it imports
    except ImportError as e:
        raise KuiperError(f"`kuiper course check` runs the lesson's tests with pytest, which is "
                          f"not importable ({e}): install it with `pip install -e \".[course]\"` "
                          "in your clone of the repository") from None


def check(number: int, extra: list[str] | None = None) -> int:
    """Run lesson `number`'s tests against the student's exercises.py; returns the exit code."""
    require_pytest()
    found = lessons()
    if number not in found:
        raise KuiperError(f"no lesson {number}; lessons: "
                          + ", ".join(f"{n} ({p.name})" for n, p in found.items()))
    folder = found[number]
    root = str(Path(__file__).resolve().parents[2])  # `import kuiper` from the lesson folder
    with tempfile.TemporaryDirectory(prefix="kuiper-course-") as scratch:
        report_path = Path(scratch) / "report.json"
        env = dict(os.environ, **{ENV: "student", REPORT_ENV: str(report_path)})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        cmd = [sys.executable, "-m", "pytest", str(folder), "-q", "--tb=short", "--no-header",
               "-p", "no:cacheprovider", "-p", "kuiper.course.report",
               "--rootdir", str(folder), "-o", "addopts=", "-W", "ignore"] + (extra or [])
        print(f"checking lesson {number} ({folder.name}) against {folder / 'exercises.py'}")
        duration = check_time(folder)
        if duration:   # said before it starts, so that a long silence is not taken for a hang
            print(f"this check takes {duration} (measured on a 2-core laptop CPU with PoCL; "
                  "`-- -x` stops at the first failure)", flush=True)
        try:
            problems = signature_problems(folder)
        except Exception as e:  # noqa: BLE001 - e.g. a syntax error: pytest will show it in full
            problems = [f"exercises.py does not load: {type(e).__name__}: {e}"]
        for problem in problems:
            print(f"warning: {problem}")
        code = subprocess.call(cmd, env=env, cwd=folder)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    if report is None:  # the plugin never ran: pytest itself did not start
        raise KuiperError(f"pytest did not run lesson {number}'s tests (exit code {code}; its "
                          "message is above); if it says there is no module named pytest, "
                          "install the course extra: pip install -e \".[course]\"")
    print(verdict(number, code, report))
    return 1 if nothing_selected(report) else code


def nothing_selected(report: dict) -> bool:
    return not report["selected"] and not report["failures"]


def verdict(number: int, code: int, report: dict) -> str:
    """The last line of `kuiper course check`: what ran, and what a failure most likely means."""
    selected, deselected = report["selected"], report["deselected"]
    if nothing_selected(report):
        return (f"lesson {number}: no test selected ({deselected} deselected by your pytest "
                "arguments): nothing was checked")
    if code == 0:
        skipped = f", {report['skipped']} skipped (the reasons are above)" \
            if report["skipped"] else ""
        if deselected:
            tests = "test passes" if selected == 1 else "tests pass"
            return (f"lesson {number}: the {selected} selected {tests}{skipped} "
                    f"({deselected} not selected: run without -k for the whole lesson)")
        return f"lesson {number}: all exercises pass{skipped}"
    untouched = any("NotImplementedError" in f["text"] and f"lesson {number}:" in f["text"]
                    for f in report["failures"])
    if untouched:
        return (f"lesson {number}: not yet (read the first failure above; NotImplementedError "
                "means a stub is still untouched)")
    return f"lesson {number}: not yet (read the first failure above)"
