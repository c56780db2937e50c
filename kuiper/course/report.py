"""The pytest plugin `kuiper course check` loads (`-p kuiper.course.report`).

It writes what pytest did into the JSON file named by $KUIPER_COURSE_REPORT, so that the
checker's last line tells the truth: how many tests ran and how many a `-k` left out (a `-k`
that selects nothing is not a pass), and whether a failure is an untouched stub
(NotImplementedError) or a wrong answer. No report at all means pytest never started.
"""

from __future__ import annotations

import json
import os

REPORT_ENV = "KUIPER_COURSE_REPORT"

_report: dict = {"selected": 0, "deselected": 0, "passed": 0, "skipped": 0, "failures": []}


def pytest_deselected(items) -> None:
    _report["deselected"] += len(items)


def pytest_collection_finish(session) -> None:
    _report["selected"] = len(session.items)


def pytest_collectreport(report) -> None:
    if report.failed:  # e.g. exercises.py does not import
        _report["failures"].append({"test": report.nodeid, "text": report.longreprtext})


def pytest_runtest_logreport(report) -> None:
    if report.failed:
        _report["failures"].append({"test": report.nodeid, "text": report.longreprtext})
    elif report.skipped:
        _report["skipped"] += 1
    elif report.when == "call":
        _report["passed"] += 1


def pytest_sessionfinish(session, exitstatus) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dict(_report, exitstatus=int(exitstatus)), f)
