"""`kuiper demo`: classify handwritten digits with a small CNN, every answer checked against
PyTorch's (kuiper/demo/)."""

from __future__ import annotations

import argparse

from kuiper.cli.options import BACKEND_CHOICES


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="classify handwritten digits with a small CNN and check "
                       "every prediction against PyTorch")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="cpu",
                   help="where to run (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device (see `kuiper devices`)")
    p.add_argument("--show", type=int, default=6, metavar="N",
                   help="how many digits to draw (default: %(default)s)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from kuiper.demo.digits import run_demo

    return run_demo(args.backend, args.device, args.show)
