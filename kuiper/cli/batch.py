"""`kuiper batch MODEL FOLDER`: every input of a folder through a model, with progress.

    kuiper batch resnet18.pnnx.param photos/ --task classify -o results/
    kuiper batch resnet18.pnnx.param arrays/ --backend opencl -o results/
    kuiper batch resnet18.pnnx.param photos/ --task classify -o results/ --ray --workers 4

FOLDER holds `.npy` arrays (one input of the model each, its batch dimension of 1 optional)
and/or images, prepared as `kuiper run` prepares them for --task (images need one). Each
input's outputs are saved as results/<its name without suffix>.npy (.npz for several
outputs). A progress bar shows inputs done and inputs per second on a terminal; the
throughput is printed at the end. Each input runs through the model alone, as a plain loop
of `graph(x)` would run it, so the results are the same arrays (--model-batch N runs N per
call: faster for small models, equal within float32 rounding).

--ray runs the same job on Ray Data (kuiper/batch/ray_job.py): --workers Ray workers, each
loading the model once; on the Ray cluster RAY_ADDRESS names (several machines), else on a
local one. Ray is an extra: `pip install "kuiper-engine[ray]"`.
"""

from __future__ import annotations

import argparse

from kuiper.cli.options import BACKEND_CHOICES, check_model_path
from kuiper.core.errors import KuiperError

TASKS = ("classify", "detect", "raw")


def add_parser(sub) -> None:
    p = sub.add_parser("batch", help="run every input of a folder through a model, with a "
                       "progress bar and the throughput (locally, or on Ray)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the .pnnx.param (or an .onnx / .pt to convert)")
    p.add_argument("inputs", nargs="+", metavar="FOLDER_OR_FILE",
                   help="folders of .npy arrays and images, or files")
    p.add_argument("-o", "--output", metavar="DIR", help="save each input's outputs in DIR "
                   "(default: run and report only)")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="cpu",
                   help="where the model runs (default: %(default)s)")
    p.add_argument("--device", help="OpenCL device: 'P:D' as in PYOPENCL_CTX, or part of its "
                   "name")
    p.add_argument("--task", choices=TASKS, help="how images are prepared (classify: "
                   "center-crop + ImageNet mean/std; detect: letterbox; raw: squash); "
                   "needed for images")
    p.add_argument("--chunk", type=int, default=32, metavar="N", help="inputs read and run per "
                   "call, one Ray batch (default: %(default)s)")
    p.add_argument("--model-batch", type=int, default=1, metavar="N",
                   help="inputs per model call (default: %(default)s, each alone)")
    p.add_argument("--ray", action="store_true", help="run on Ray Data (RAY_ADDRESS's cluster, "
                   "else a local one)")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="with --ray: Ray workers, each loading the model once "
                   "(default: %(default)s)")
    p.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    import time

    from kuiper.batch.local import Report, check_output_names, run_local, save_outputs
    from kuiper.batch.predictor import Predictor, check_task, input_files

    for name in ("chunk", "model_batch", "workers"):
        if getattr(args, name) < 1:
            raise KuiperError(f"--{name.replace('_', '-')} must be 1 or more")
    check_model_path(args.model)  # (main converted an .onnx / .pt MODEL already)
    files = input_files(args.inputs)
    check_task(files, args.task)
    if args.output:
        check_output_names(files)
    write = save_outputs(args.output) if args.output else None
    options = {"device": args.device} if args.backend == "opencl" and args.device else {}
    if args.ray:
        from kuiper.batch.ray_job import run_on_ray

        start = time.perf_counter()
        count = run_on_ray(args.model, files, write, backend=args.backend,
                           workers=args.workers, batch_size=args.chunk, task=args.task,
                           model_batch=args.model_batch, **options)
        report = Report(count, time.perf_counter() - start,
                        f"{args.backend}, {args.workers} Ray worker(s), start-up included")
    else:
        predictor = Predictor(args.model, args.backend, args.task, args.model_batch, **options)
        report = run_local(predictor, files, write, args.chunk)
    print(report.line())
    if args.output:
        print(f"outputs saved in {args.output}/ (one file per input)")
    return 0
