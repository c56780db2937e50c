"""`kuiper run`: run a model on arrays or images, and say what the answer means.

    kuiper run m.pnnx.param --input x.npy                      an array, as it is
    kuiper run m.pnnx.param --input cat.png --labels names.txt a classifier's top-5
    kuiper run m.pnnx.param --input photos/                    a folder of images: one batch
    kuiper run yolo.pnnx.param --input street.jpg --task detect --output boxes.png

The task decides what happens around the network (kuiper/io/preprocess.py, postprocess.py):

    classify  center-crop, ImageNet mean/std (3-channel inputs); prints the top-5 per image
    detect    letterbox, [0, 1] only; decodes YOLO-style rows (N, boxes, 5 + classes) with
              postprocess.detect and draws the boxes on the original image (--output x.png)
    raw       squash, [0, 1] only; prints the output statistics

Without --task it is guessed from the output's shape, and the guess is printed; a guessed
detector must also have the values of one (scores in [0, 1], postprocess.yolo_rows_problem),
else its output is printed as raw statistics and the run asks for --task. An output shaped like
no known task asks for --task too (images need it: it decides their preprocessing). Everything
the run chooses (task, resize, normalisation, batch) is printed, so a wrong choice shows.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kuiper.cli.options import add_model_options, load_model
from kuiper.core.errors import InputError, KuiperError
from kuiper.io.files import require_writable

log = logging.getLogger("kuiper.tools")

TOP_K = 5
NUMPY_SUFFIXES = (".npy", ".npz")
DRAW_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def float_list(text: str) -> tuple[float, ...]:
    """argparse type for --mean/--std: '0.485,0.456,0.406' or one value for every channel."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or not all(np.isfinite(values)):
        raise argparse.ArgumentTypeError(f"'{text}': expected numbers joined by ',', e.g. "
                                         "0.485,0.456,0.406")
    return values


def add_parser(sub) -> None:
    from kuiper.io.preprocess import RESIZE_MODES, TASKS

    p = sub.add_parser("run", help="run a model on .npy arrays or images (classify, detect)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    p.add_argument("--input", action="append", metavar="FILE",
                   help=".npy array, image, or folder of images; several images (or a folder) "
                   "make one batch; repeat for models with several inputs (default: seeded "
                   "random inputs)")
    p.add_argument("--output", metavar="FILE", help="save the output: .npy (one output), .npz "
                   "(all outputs, by name), or with --task detect an image (.png, .jpg) with the "
                   "boxes drawn (NAME_0.png, NAME_1.png... for several images)")
    p.add_argument("--task", choices=TASKS, help="what the model does (default: guessed from "
                   "the output shape, and printed)")
    p.add_argument("--resize", choices=RESIZE_MODES, help="how images are fitted to the input "
                   "size (default: center-crop for classify, letterbox for detect, else squash)")
    p.add_argument("--mean", type=float_list, metavar="M[,M,M]", help="per-channel mean, "
                   "subtracted from pixels scaled to [0, 1] (default: ImageNet's for classify, "
                   "none otherwise)")
    p.add_argument("--std", type=float_list, metavar="S[,S,S]", help="per-channel std, divided "
                   "by after the mean (in [0, 1] units too)")
    p.add_argument("--no-normalize", action="store_true",
                   help="only scale pixels to [0, 1]; no mean/std")
    p.add_argument("--labels", metavar="FILE", help="class names, one per line")
    p.add_argument("--conf", type=float, default=0.25, help="detect: score threshold "
                   "(default: %(default)s)")
    p.add_argument("--iou", type=float, default=0.45, help="detect: NMS IoU threshold "
                   "(default: %(default)s)")
    p.add_argument("--trace", metavar="FILE.json", help="also write a Chrome trace of one run, "
                   "per operator (open it in https://ui.perfetto.dev or chrome://tracing)")
    p.set_defaults(func=run_command, load_model=load_model)


# --- checks before anything runs ------------------------------------------------------------
def check_output_path(path: str, task: str | None) -> None:
    """--output must be a file name Kuiper can write, in a folder that exists."""
    suffix = Path(path).suffix.lower()
    if suffix not in NUMPY_SUFFIXES + DRAW_SUFFIXES:
        raise KuiperError(f"--output {path}: use a .npy or .npz file name (or, with --task "
                          "detect, an image name such as boxes.png)")
    if suffix in DRAW_SUFFIXES and task not in (None, "detect"):
        raise KuiperError(f"--output {path}: an image is written only with --task detect; use "
                          ".npy or .npz for --task {task}")
    require_writable(path, "--output", "output.npy")


ASK_FOR_TASK = "pass --task classify, --task detect or --task raw to say what the model does"


def guess_task(outputs) -> tuple[str | None, str]:
    """(task, why) from the model's outputs: N x C logits, or YOLO rows N x B x (5 + C) (whose
    values the run checks too); None when the shape fits no task."""
    first = outputs[0]
    dims = "x".join("?" if d is None else str(d) for d in first.shape)
    if len(outputs) == 1 and len(first.shape) == 2 and (first.shape[1] or 0) > 1:
        return "classify", f"the output {dims} looks like class scores"
    if len(first.shape) == 3 and (first.shape[2] or 0) >= 6:
        return "detect", f"the output {dims} looks like YOLO rows (boxes x (5 + classes))"
    return None, f"the output {dims} looks like neither class scores nor YOLO rows"


# --- inputs ---------------------------------------------------------------------------------
def is_image_arg(path: str) -> bool:
    from kuiper.io.inputs import is_image

    return Path(path).is_dir() or is_image(path)


def read_inputs(args, graph, prep) -> tuple[list[np.ndarray], list]:
    """The arrays to feed, and the images' placements (for drawing boxes back)."""
    from kuiper.io.inputs import load_input
    from kuiper.io.preprocess import load_images

    ports = graph.inputs
    requested = args.input_shape
    if len(ports) == 1 and all(is_image_arg(p) for p in args.input):
        batch = requested[0][0] if requested else None
        x, placements = load_images(args.input, ports[0], prep, batch)
        print(f"preprocessing: {len(placements)} image(s) -> {'x'.join(map(str, x.shape))}: "
              f"{prep.describe(x.shape[1])}")
        return [x], placements
    if len(args.input) != len(ports):
        raise InputError(f"the model has {len(ports)} input(s) "
                         f"({', '.join(str(p) for p in ports)}), got {len(args.input)} "
                         "--input file(s)")
    inputs, placements = [], []
    for path, port in zip(args.input, ports):
        if is_image_arg(path):
            x, where = load_images([path], port, prep)
            placements += where
            print(f"preprocessing {path}: {prep.describe(x.shape[1])}")
        else:
            x = load_input(path, port)
        inputs.append(x)
    if requested:  # --input-shape and a file disagree: say so instead of running another size
        for path, x, shape in zip(args.input, inputs, requested):
            if tuple(x.shape) != tuple(shape):
                raise InputError(f"--input-shape asks for {'x'.join(map(str, shape))} but "
                                 f"{path} is {'x'.join(map(str, x.shape))}: drop "
                                 "--input-shape, or pass data of that shape")
    return inputs, placements


# --- the command ----------------------------------------------------------------------------
def run_command(args: argparse.Namespace) -> int:
    from kuiper.io.inputs import random_inputs, read_labels
    from kuiper.io.preprocess import Preprocessing
    from kuiper.io.trace import check_writable

    # Check every file argument before the model loads and runs: a typo in the last option
    # should not cost a whole inference first.
    if args.output:
        check_output_path(args.output, args.task)
    if args.trace:
        check_writable(args.trace)
    labels = read_labels(args.labels) if args.labels else None
    options = {"profiling": True} if args.trace and args.backend == "opencl" else {}
    graph = args.load_model(args, **options)
    if args.output and args.output.endswith(".npy") and len(graph.outputs) != 1:
        raise KuiperError(f"the model has {len(graph.outputs)} outputs: save them with "
                          "--output FILE.npz")

    task, guessed = args.task, args.task is None
    if guessed:
        task, why = guess_task(graph.outputs)
        if task is None and args.input and any(is_image_arg(p) for p in args.input):
            raise KuiperError(f"kuiper run cannot tell what this model does: {why}, and images "
                              f"are preprocessed for the task: {ASK_FOR_TASK}")
        if task is None:
            task = "raw"
            print(f"task: unknown ({why}): printing the output as it is; {ASK_FOR_TASK}")
        else:
            print(f"task: {task} ({why}; set --task to change)")
    if args.output and args.output.lower().endswith(DRAW_SUFFIXES) and task != "detect":
        raise KuiperError(f"--output {args.output}: an image is written only for --task "
                          f"detect, and this run is {task}; use .npy or .npz")
    shape = graph.inputs[0].shape
    channels = shape[1] if len(shape) == 4 and shape[1] is not None else 3
    prep = Preprocessing.for_task(task, channels, args.resize, args.mean, args.std,
                                  not args.no_normalize)
    if args.input:
        inputs, placements = read_inputs(args, graph, prep)
    else:
        inputs, placements = random_inputs(graph.inputs), []
        print("no --input given: using seeded random inputs")
    for port, x in zip(graph.inputs, inputs):
        print(f"input  {port.name}: {'x'.join(map(str, x.shape))} {x.dtype}")

    start = time.perf_counter()
    outputs = [np.asarray(y) for y in graph.forward(*inputs)]
    seconds = time.perf_counter() - start
    print_outputs(graph.outputs, outputs)
    if task == "classify" and outputs[0].ndim == 2 and np.issubdtype(outputs[0].dtype,
                                                                    np.floating):
        print_top_k(outputs[0], labels, [Path(p.path).name for p in placements])
    detections = None
    if task == "detect":
        from kuiper.io.postprocess import yolo_rows_problem

        problem = yolo_rows_problem(outputs[0])
        if problem is not None and not guessed:
            raise KuiperError(f"--task detect expects YOLO-style rows N x boxes x (5 + "
                              f"classes), but {problem}: this model does not output detections "
                              "(a detector exported without its final sigmoid gives logits: "
                              "export it with the sigmoid)")
        if problem is not None:  # the shape fooled the guess: say so, decode nothing
            print(f"not decoded as detections: the output has the shape of YOLO rows, but "
                  f"{problem}; {ASK_FOR_TASK}")
            task = "raw"
        else:
            detections = report_detections(outputs[0], placements, labels, args.conf, args.iou)
    print(f"{args.backend}: {seconds * 1e3:.2f} ms (first run, includes one-time work)")

    if args.trace:
        write_run_trace(args.trace, graph, inputs)
    if args.output:
        if args.output.lower().endswith(DRAW_SUFFIXES) and detections is None:
            raise KuiperError(f"--output {args.output}: no detections to draw (the output is "
                              "not a detector's); save it as .npy or .npz")
        if args.output.lower().endswith(DRAW_SUFFIXES):
            for path in draw_all(args.output, placements, detections, labels):
                print(f"saved {path}")
        else:
            save_outputs(args.output, graph.outputs, outputs)
            print(f"saved {args.output}")
    return 0


def print_outputs(ports, outputs: list[np.ndarray]) -> None:
    for port, y in zip(ports, outputs):
        stats = ""
        if y.size and np.issubdtype(y.dtype, np.number):
            stats = f"  min {y.min():.4g}  mean {y.mean():.4g}  max {y.max():.4g}"
        print(f"output {port.name}: {'x'.join(map(str, y.shape)) or 'scalar'} {y.dtype}{stats}")


def print_top_k(logits: np.ndarray, labels: Sequence[str] | None, names: Sequence[str] = (),
                rows: int = 4) -> None:
    """Top-5 classes per sample, with softmax probabilities (for classifier outputs N x C)."""
    from kuiper.io.postprocess import softmax_topk

    probs, classes = softmax_topk(logits, TOP_K)
    for n in range(min(rows, len(probs))):
        cells = [f"{class_name(c, labels)} {p:.1%}" for p, c in zip(probs[n], classes[n])]
        which = f" [{names[n] if n < len(names) else n}]" if len(probs) > 1 else ""
        print(f"  top-{len(cells)}{which}: " + ", ".join(cells))
    if len(probs) > rows:
        print(f"  ... {len(probs) - rows} more samples")


def class_name(c: int, labels: Sequence[str] | None) -> str:
    return labels[c] if labels is not None and c < len(labels) else f"class {c}"


def report_detections(pred: np.ndarray, placements, labels, conf: float, iou: float
                      ) -> list[np.ndarray]:
    """Decode, print, and return the boxes per image (in original-image pixels when the
    input came from images, else in network-input pixels)."""
    from kuiper.io.postprocess import detect

    if pred.ndim != 3 or pred.shape[2] < 6:
        raise KuiperError(f"--task detect expects YOLO-style rows N x boxes x (5 + classes), "
                          f"but the first output is {'x'.join(map(str, pred.shape))}")
    results = detect(pred, conf, iou)
    where = "original image pixels" if placements else "input pixels"
    print(f"detections (score > {conf:g}, NMS IoU {iou:g}; boxes x1,y1,x2,y2 in {where}):")
    for n, found in enumerate(results):
        if n < len(placements):
            found[:, :4] = placements[n].to_original(found[:, :4])
        name = Path(placements[n].path).name if n < len(placements) else f"[{n}]"
        print(f"  {name}: {len(found)} box(es)")
        for x1, y1, x2, y2, score, c in found[:20]:
            print(f"    {class_name(int(c), labels)} {score:.2f}  "
                  f"{x1:.0f},{y1:.0f},{x2:.0f},{y2:.0f}")
        if len(found) > 20:
            print(f"    ... {len(found) - 20} more")
    return results


def draw_all(output: str, placements, detections, labels) -> list[Path]:
    from kuiper.io.draw import draw_boxes

    if not placements:
        raise KuiperError(f"--output {output}: boxes are drawn on the input images, and no "
                          "image was given (--input photo.jpg)")
    base = Path(output)
    paths = [base] if len(placements) == 1 else [
        base.with_name(f"{base.stem}_{n}{base.suffix}") for n in range(len(placements))]
    for path, placement, found in zip(paths, placements, detections):
        draw_boxes(placement.path, found, path, labels)
    return paths


def save_outputs(path: str, ports, outputs: list[np.ndarray]) -> None:
    if path.endswith(".npy") and len(outputs) != 1:
        raise KuiperError(f"the model has {len(outputs)} outputs: save them with "
                          "--output FILE.npz")
    try:
        if path.endswith(".npz"):
            np.savez(path, **{port.name: y for port, y in zip(ports, outputs)})
        else:
            np.save(path, outputs[0])
    except OSError as e:  # a read-only folder, a full disk
        raise KuiperError(f"--output {path}: cannot be written ({e.strerror or e})") from None


def write_run_trace(path: str, graph, inputs: list[np.ndarray]) -> None:
    """One more run, timed per operator (the first included one-time work)."""
    from kuiper.io.trace import spans_of, write_trace

    label = f"kuiper {graph.backend}"
    count = write_trace(path, [(label, spans_of(graph, inputs))])
    print(f"trace: {count} operator events in {path} (open in https://ui.perfetto.dev)")
