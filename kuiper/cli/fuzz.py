"""`kuiper fuzz`: the fuzzer's command line (the fuzzer itself is kuiper/fuzz/)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

from kuiper.cli.options import comma_list
from kuiper.fuzz.sandbox import CaseLimits

# The scenarios of kuiper/fuzz/scenarios.py, named here without importing it (and NumPy) for
# `kuiper fuzz --help`; tests/fuzz/test_fuzz.py checks that the two lists agree.
SCENARIO_NAMES = ("changed_files", "caches", "plugins", "arguments", "edges")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", type=int, default=2000, help="how many mutated models (default "
                   "2000; a long campaign is 100000)")
    p.add_argument("--scenarios", type=int, default=None, metavar="N",
                   help="also N scenario cases, around the model rather than in its files: "
                   "files changed after a load, hostile cache files, failing plugins, wrong "
                   "API arguments, edge values CPU against OpenCL (default: a tenth of --cases)")
    p.add_argument("--scenario", type=comma_list(tuple(SCENARIO_NAMES), "scenario"),
                   default=None, help=f"comma-separated, the scenarios to draw from (default "
                   f"all: {', '.join(SCENARIO_NAMES)})")
    p.add_argument("--seed", type=int, default=0, help="case i of a seed is always the same file")
    p.add_argument("--backends", type=comma_list(("cpu", "opencl"), "backend"), default=["cpu"],
                   help="comma-separated: cpu, opencl (default cpu)")
    p.add_argument("--opencl-share", type=float, default=0.25,
                   help="with both backends, the share of cases run on OpenCL (default 0.25)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases at once")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds per case (default 10)")
    p.add_argument("--memory-limit", type=int, default=3072,
                   help="MiB of address space per case (default 3072)")
    p.add_argument("--minutes", type=float, default=None, help="stop starting cases after this")
    p.add_argument("--save", type=Path, default=None,
                   help="folder to save one failing case per distinct failure into")
    p.add_argument("--report", type=Path, default=None,
                   help="also write the summary as JSON to this file")
    p.add_argument("--replay", type=Path, default=None,
                   help="run the saved cases of this folder (a corpus) instead of new ones")


def run(args: argparse.Namespace) -> int:
    from kuiper.fuzz import campaign

    backends = args.backends
    if args.replay is not None and not args.replay.is_dir():
        print(f"kuiper: error: --replay {args.replay}: not a folder of saved cases",
              file=sys.stderr)
        return 2
    limits = CaseLimits(seconds=args.time_limit, memory_bytes=args.memory_limit << 20)
    if args.replay is not None:
        cases = list(campaign.corpus(args.replay))
        backends = sorted({case.backend for case in cases})
        total = len(cases)
    else:
        count = args.cases // 10 if args.scenarios is None else args.scenarios
        cases = itertools.chain(
            campaign.generate(args.seed, args.cases, backends, args.opencl_share),
            campaign.generate_scenarios(args.seed, count, backends, args.scenario))
        total = args.cases + count

    def progress(report):
        done = sum(report.counts.values())
        if done % 500 == 0 or done == total:
            print(f"  {done}/{total} cases, {report.failed} failed", file=sys.stderr)

    report = campaign.run(cases, limits, backends, jobs=max(1, args.jobs), save=args.save,
                          progress=progress,
                          budget_seconds=args.minutes * 60 if args.minutes else None)
    for line in report.lines():
        print(line)
    if args.report is not None:
        args.report.write_text(json.dumps(report.as_json(), indent=1) + "\n")
    if report.failed and args.save:
        print(f"one case per distinct failure saved under {args.save}; replay them with "
              f"kuiper fuzz --replay {args.save}")
    return 1 if report.failed else 0


def add_parser(sub) -> None:
    """`kuiper fuzz`."""
    p = sub.add_parser("fuzz", help="fuzz the loader and layers with mutated models, each case "
                       "in a sandbox (robustness campaign)",
                       description="Fuzz Kuiper's loader and layers with mutated models, each "
                       "case in a sandbox with time and memory limits. Exit status 1 if any "
                       "case crashed, hung, allocated past the limit or raised a bare exception.")
    add_arguments(p)
    p.set_defaults(func=run)
