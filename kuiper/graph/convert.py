"""Load what users have: an ONNX file or a TorchScript file, converted to PNNX by pnnx.

Kuiper reads PNNX models only (`.pnnx.param` + `.pnnx.bin`). Most people arrive with a
`model.onnx` or a TorchScript `model.pt` (`torch.jit.trace(model, x).save("model.pt")`), and
pnnx converts both: its wheel (`pip install pnnx`) bundles the converter, a native program
beside its `__init__.py`. So `kuiper.load("model.onnx", input_shapes=[...])` runs that program
once and loads what it wrote:

    source file --pnnx--> <cache>/<stem>-<key>/<stem>.pnnx.param + .pnnx.bin (+ pnnx.log)

The cache entry is keyed by the file's contents (SHA-256), those of its external data files,
the input shapes and the pnnx version, so a second load of the same file reuses it, and an
edited file or a new pnnx converts again.

An ONNX file may keep its weights in other files ("external data"): PyTorch's default exporter
(`torch.onnx.export(m, (x,), "m.onnx")`, the dynamo one) writes `m.onnx` and `m.onnx.data` even
for a small model, and a model over 2 GB always has them. ONNX names each such file by a path
relative to the `.onnx` (`external_data` lists them), and pnnx needs them in its work folder:
without them its onnxruntime crashes. pnnx's own reader then looks for the weights in ONE
file, `<name>.onnx.data`, whatever the model says (elsewhere it writes garbage weights and
exits 0): PyTorch's layout is linked as it is, any other is rewritten in that layout with the
`onnx` package (`stage_source`).

The cache folder is kuiper/core/cache.py's (`$KUIPER_CACHE_DIR`, else
`$XDG_CACHE_HOME/kuiper`, else `~/.cache/kuiper`). Delete it whenever you like.

The cache is never trusted over the source. An entry is used only if it is a real folder
marked COMPLETE whose files are regular files (`entry_ready`); anything else in its place (a
file, a dangling link or a link loop, a mark without the model, a FIFO) is a broken entry,
converted again once and replaced, then used. `kuiper.load` also converts once more when a
cached model does not parse. The cached pnnx.log is read through `read_cache_file` (a regular
file of bounded size) and ignored with a warning otherwise.

pnnx prints a long log of its passes. It goes to `pnnx.log` in the cache entry and stays quiet,
unless `KUIPER_PNNX_LOG=1` (or `kuiper convert --show-log`) asks to see it; a failed
conversion names that file. Kuiper finds the program without importing the `pnnx` package,
which would import PyTorch (seconds), and runs it as a subprocess: Kuiper never runs the
model's own code, and pnnx itself only reads the file.

Tested with one pnnx version, TESTED_PNNX_VERSION below. A newer pnnx usually works; if it
writes a file format Kuiper does not read (another magic number on the first line), the
error says so and names the version to install.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from kuiper.core.cache import cache_dir, read_cache_file
from kuiper.core.errors import ConversionError
from kuiper.core.log import warn
from kuiper.parser.param import MAGIC

# The one place that states which pnnx Kuiper is tested with (pip show pnnx).
TESTED_PNNX_VERSION = "20261020"
INSTALL_COMMAND = f"pip install pnnx=={TESTED_PNNX_VERSION}"

# What pnnx converts: ONNX through its onnx route, everything else as TorchScript. A `.pth` is
# usually a state_dict (weights only, no graph), which no converter can read: the failure
# message says how to save TorchScript instead.
ONNX_SUFFIXES = (".onnx",)
TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".torchscript", ".ptl")
CONVERTIBLE_SUFFIXES = ONNX_SUFFIXES + TORCHSCRIPT_SUFFIXES
COMPLETE = "complete"  # written last in a cache entry: an entry without it is not used
LOG_NAME = "pnnx.log"
# pnnx writes more than Kuiper reads (ncnn files, its own ONNX re-export, a simplified copy
# of an ONNX input); a cache entry keeps only these, so it costs about the model's size once.
KEPT = (".pnnx.param", ".pnnx.bin", "_pnnx.py")


def is_convertible(path: str | os.PathLike) -> bool:
    """Whether `path` is a model pnnx converts (by its suffix), rather than a .pnnx.param."""
    return str(path).lower().endswith(CONVERTIBLE_SUFFIXES)


def pnnx_executable() -> Path | None:
    """The converter program inside the installed `pnnx` package, or None without one.

    Found through the package's location only: importing `pnnx` would import PyTorch.
    """
    spec = importlib.util.find_spec("pnnx")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for name in ("pnnx", "pnnx.exe"):
            program = Path(folder) / name
            if program.is_file() and os.access(program, os.X_OK):
                return program
    return None


def pnnx_version() -> str:
    try:
        return importlib.metadata.version("pnnx")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"



def shape_argument(input_shapes: Sequence[Sequence[int]]) -> str:
    """pnnx's `inputshape=` value: [1,3,224,224],[1,4] (float32 inputs)."""
    return ",".join("[" + ",".join(str(int(d)) for d in shape) + "]" for shape in input_shapes)


def manual_command(source: Path, input_shapes: Sequence[Sequence[int]] | None) -> str:
    """The command that converts `source` by hand, as this module would run it."""
    shapes = shape_argument(input_shapes) if input_shapes else "[1,3,224,224]"
    return f"pnnx {source} inputshape={shapes}"


def to_pnnx(source: str | os.PathLike, input_shapes: Sequence[Sequence[int]] | None = None,
            show_log: bool | None = None) -> Path:
    """Convert an ONNX or TorchScript file with pnnx (or reuse the cached result).

    Returns the path of the `.pnnx.param`; its `.pnnx.bin` lies beside it. `input_shapes` is
    the shape of each input to convert at (an ONNX file with static shapes needs none).
    `show_log` streams pnnx's own log to stderr (default: the KUIPER_PNNX_LOG variable).
    """
    return converted(source, input_shapes, show_log)[0]


def converted(source: str | os.PathLike, input_shapes: Sequence[Sequence[int]] | None = None,
              show_log: bool | None = None, refresh: bool = False) -> tuple[Path, bool]:
    """`to_pnnx`, and whether the result came from the cache (False: converted now).
    `refresh` converts again even if the cache holds the result: `kuiper.load` asks for it
    once when a cached model's files turn out damaged."""
    source = Path(source)
    if not source.is_file():
        raise ConversionError(f"{source}: no such file (a model to convert with pnnx)")
    program = pnnx_executable()
    if program is None:
        raise ConversionError(
            f"{source}: not a PNNX model, and converting it to one needs pnnx, which is not "
            f"installed. Install it with `{INSTALL_COMMAND}` (it needs PyTorch: install "
            "torch first to choose its build, e.g. the CPU one), then load the file again; or "
            f"convert by hand with `{manual_command(source.resolve(), input_shapes)}` and load "
            f"{source.stem}.pnnx.param")
    try:
        shapes = [tuple(int(d) for d in s) for s in input_shapes] if input_shapes else None
    except (TypeError, ValueError):
        raise ConversionError(f"input_shapes must be a list of shapes such as [(1, 3, 224, "
                              f"224)], got {input_shapes!r}") from None
    external = external_data(source)
    entry = cache_entry(source, shapes, external)
    param = entry / f"{source.stem}.pnnx.param"
    if show_log is None:
        show_log = os.environ.get("KUIPER_PNNX_LOG", "") not in ("", "0")
    if refresh:
        remove_entry(entry)
    if entry_ready(entry, source.stem):
        if show_log:  # converted earlier: its log is the one to show
            show_cached_log(entry / LOG_NAME)
        return param, True
    version = pnnx_version()
    tested = ("" if version == TESTED_PNNX_VERSION
              else f" (Kuiper is tested with pnnx {TESTED_PNNX_VERSION})")
    print(f"kuiper: converting {source.name} with pnnx {version}{tested} ...", file=sys.stderr,
          flush=True)
    run_pnnx(program, source, shapes, entry, show_log, external)
    return param, False


def _regular(path: Path) -> bool:
    """Whether `path` is itself a regular file (not a link to one, a FIFO, a folder)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def entry_ready(entry: Path, stem: str) -> bool:
    """Whether the cache entry `entry` holds a finished conversion Kuiper may use: a real
    folder (not a link), marked COMPLETE, with its .pnnx.param and every other file it keeps
    regular files. Anything else (a file or a dangling link in its place, a link loop, a mark
    without the model) is a broken entry, converted again and replaced."""
    try:
        if not stat.S_ISDIR(os.lstat(entry).st_mode):
            return False
    except OSError:
        return False
    if not (_regular(entry / COMPLETE) and _regular(entry / f"{stem}.pnnx.param")):
        return False
    kept = [entry / f"{stem}{suffix}" for suffix in KEPT]
    return all(_regular(path) for path in kept if os.path.lexists(path))


def show_cached_log(log: Path) -> None:
    """pnnx's log of an earlier conversion, to stderr; a missing or odd one (a FIFO, a huge
    file) is ignored with a warning: a log is a convenience, never a reason to fail."""
    try:
        sys.stderr.write(read_cache_file(log, errors="replace"))
    except OSError as e:
        warn(f"pnnx's log of the cached conversion {log} cannot be shown "
             f"({e.strerror or e}): it is ignored; delete the cache entry "
             f"{log.parent} to convert again with a new log")


def remove_entry(entry: Path) -> None:
    """Remove whatever is at `entry`: a folder, a file, a link (dangling or looping)."""
    try:
        info = os.lstat(entry)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ConversionError(f"the cache entry {entry} cannot be read ({e.strerror or e}): "
                              "delete it, or set KUIPER_CACHE_DIR to another folder") from None
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(entry)
        else:
            os.unlink(entry)
    except OSError as e:
        raise ConversionError(f"the broken cache entry {entry} cannot be replaced "
                              f"({e.strerror or e}): delete it, or set KUIPER_CACHE_DIR to "
                              "another folder") from None


def _onnx_model(source: Path):
    """The ONNX graph of `source` without its weights (onnx.load with load_external_data=False),
    or None when the `onnx` package is not installed or cannot parse the file."""
    if source.suffix.lower() not in ONNX_SUFFIXES or importlib.util.find_spec("onnx") is None:
        return None
    import onnx

    try:
        return onnx.load(str(source), load_external_data=False)
    except Exception:  # noqa: BLE001 - not parsable: pnnx will say what is wrong with it
        return None


def _tensors(graph):
    """Every TensorProto of an ONNX graph (or function): initializers, and the tensors of node
    attributes (Constant's value), subgraphs (If, Loop) included."""
    yield from getattr(graph, "initializer", ())
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _tensors(subgraph)


def external_data(source: Path) -> list[str]:
    """The external data files of an ONNX file, as the paths (relative to its folder) it names.

    Read with the `onnx` package (which PyTorch's exporter needs, so it is there when such a
    file was just written); without it, or for a file it cannot parse, the files PyTorch
    writes are looked for by name: `<name>.data` and `<name>_data` beside `<name>`. A path that
    leaves the model's folder, or a file that is missing, is a ConversionError naming it: pnnx
    would crash on it without saying why.
    """
    if source.suffix.lower() not in ONNX_SUFFIXES:
        return []
    model = _onnx_model(source)
    if model is None:
        return sorted(p.name for p in source.parent.glob(f"{source.name}*")
                      if p.name in (f"{source.name}.data", f"{source.name}_data") and p.is_file())
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    tensors = [t for g in [model.graph, *model.functions] for t in _tensors(g)]
    locations = sorted({ExternalDataInfo(t).location for t in tensors if uses_external_data(t)})
    folder = source.parent.resolve()
    for location in locations:
        relative = PurePosixPath(location.replace("\\", "/"))
        path = (folder / relative).resolve()
        if relative.is_absolute() or folder not in path.parents:
            raise ConversionError(f"{source}: its external data file '{location}' is not inside "
                                  f"the model's folder {folder}: ONNX names external data by "
                                  "a path relative to the .onnx file")
        if not path.is_file():
            raise ConversionError(
                f"{source}: the model keeps its weights in external data, and its file "
                f"'{location}' is not in {folder}. Keep every file PyTorch wrote together "
                f"({source.name} and {', '.join(locations)}): copy or move them as one")
    return locations


def cache_entry(source: Path, shapes: list[tuple[int, ...]] | None,
                external: Sequence[str] = ()) -> Path:
    """The cache folder of `source` converted at `shapes`: keyed by its contents and those of
    its external data files (their names too), the shapes and the pnnx version."""
    digest = hashlib.sha256()
    for path, name in [(source, "")] + [(source.parent / e, e) for e in external]:
        digest.update(f"|{name}|".encode())
        try:
            with open(path, "rb") as f:
                for block in iter(lambda f=f: f.read(1 << 20), b""):
                    digest.update(block)
        except OSError as e:
            raise ConversionError(f"{path}: cannot be read ({e.strerror or e})") from None
    digest.update(f"|{source.suffix.lower()}|{shapes}|pnnx {pnnx_version()}".encode())
    return cache_dir() / f"{source.stem}-{digest.hexdigest()[:16]}"


def _link(target: Path, link: Path) -> None:
    """`link`: a hard link to `target`, else a copy (another file system), its folders made.

    Not a symbolic link: onnxruntime (inside pnnx) resolves one, finds the external data
    outside the work folder, and refuses it ("External data path escapes model directory")."""
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(target.resolve(), link)
    except OSError:
        shutil.copyfile(target, link)


def stage_source(source: Path, external: Sequence[str], work: Path) -> Path:
    """Put `source` into pnnx's work folder as pnnx can read it, and return its path there.

    A TorchScript file, an ONNX file without external data, and PyTorch's layout (one file,
    `<name>.onnx.data`) are linked (`_link`). Any other external data (several files, or
    another name) is rewritten with the `onnx` package into `<name>.onnx.data`, the one file
    pnnx's reader looks for (module docstring)."""
    staged = work / source.name
    pnnx_data = f"{source.name}.data"
    if not external or list(external) == [pnnx_data]:
        _link(source, staged)
        for location in external:
            _link(source.parent / location, work / location)
        return staged
    if importlib.util.find_spec("onnx") is None:
        raise ConversionError(
            f"{source}: its weights are in {', '.join(external)}, and pnnx reads them only "
            f"from one file named {pnnx_data}: install the onnx package (`pip install onnx`) "
            "so that Kuiper can rewrite them that way, or save the model with "
            f"onnx.save_model(model, path, save_as_external_data=True, location='{pnnx_data}')")
    import onnx

    print(f"kuiper: gathering the external data of {source.name} into one file for pnnx ...",
          file=sys.stderr, flush=True)
    model = onnx.load(str(source))  # the weights too, from every file
    onnx.save_model(model, str(staged), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=pnnx_data)
    return staged


def silent_failure(log: str) -> str | None:
    """A 'FATAL ERROR' line pnnx printed about external data before exiting with status 0
    (its reader found no weights where it looked, and used whatever memory held), or None."""
    for line in _ANSI.sub("", log).splitlines():
        if line.startswith("FATAL ERROR") and "external data" in line:
            return line.strip()
    return None


def run_pnnx(program: Path, source: Path, shapes, entry: Path, show_log: bool,
             external: Sequence[str] = ()) -> None:
    """Run pnnx in a fresh folder beside `entry`, then move the folder into place.

    pnnx writes next to the path it is given, so it gets the source inside the folder
    (`stage_source`): the user's own folder stays untouched.
    A failed conversion still becomes the entry, without its COMPLETE mark, so that its log
    stays where the error message says.
    """
    work = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    try:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    except OSError as e:
        raise ConversionError(f"cannot create the conversion folder {work} "
                              f"({e.strerror or e}): set KUIPER_CACHE_DIR to a writable "
                              "folder") from None
    try:
        link = stage_source(source, external, work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    command = [str(program), link.name]
    if shapes:
        command.append(f"inputshape={shape_argument(shapes)}")
    try:
        result = subprocess.run(command, cwd=work, stdin=subprocess.DEVNULL, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                errors="replace")
    except BaseException as e:  # the program could not start, or Ctrl-C
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(e, OSError):
            raise ConversionError(f"cannot run pnnx ({program}): {e.strerror or e}; "
                                  f"reinstall it with `{INSTALL_COMMAND}`") from None
        raise
    (work / LOG_NAME).write_text(" ".join(command) + "\n" + result.stdout)
    if show_log:
        sys.stderr.write(result.stdout)
    param = work / f"{source.stem}.pnnx.param"
    problem = None
    if result.returncode != 0 or not param.is_file():
        problem = failure_hint(source, shapes, result.returncode, result.stdout)
    elif (fatal := silent_failure(result.stdout)) is not None:
        problem = (f"{source}: pnnx said '{fatal}' and went on, writing a model whose "
                   "weights cannot be trusted; Kuiper does not load it")
    else:
        problem = format_problem(param)
    for path in work.iterdir():  # keep what Kuiper reads, the log, and nothing else
        if path.is_dir() and not path.is_symlink():  # an external data file's folder
            shutil.rmtree(path)
        elif path.name != LOG_NAME and not path.name.endswith(KEPT):
            path.unlink()
    if problem is None:
        if entry_ready(entry, source.stem):  # another process converted it meanwhile
            shutil.rmtree(work, ignore_errors=True)
            return
        (work / COMPLETE).write_text(f"pnnx {pnnx_version()}\n")
    remove_entry(entry)  # a broken entry, or a failed conversion's: replaced by this one
    try:
        os.replace(work, entry)
    except OSError as e:  # another process put something there between the two calls
        shutil.rmtree(work, ignore_errors=True)
        raise ConversionError(f"cannot store the conversion in the cache entry {entry} "
                              f"({e.strerror or e}): load again, or delete it") from None
    if problem is not None:
        raise ConversionError(f"{problem} (pnnx's log: {entry / LOG_NAME})")


# pnnx's log colours onnxruntime's warnings; the message quotes the log without the codes
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What a failure message quotes from the end of pnnx's log: its last words are the cause
# (onnxruntime's "External data path does not exist", a missing operator, a bad proto)
LOG_TAIL_LINES = 3


def log_tail(log: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` non-empty lines of pnnx's log, without colour codes, joined by ' | '."""
    kept = [line.strip() for line in _ANSI.sub("", log).splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def exit_description(returncode: int) -> str:
    """'exit status 255', or 'crashed with SIGSEGV' for a process killed by a signal."""
    if returncode < 0:
        try:
            return f"crashed with {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exit status {returncode}"


def dynamic_inputs(source: Path) -> list[str] | None:
    """The inputs of an ONNX file whose shape has a symbolic or unknown size (pnnx then needs
    input shapes), [] when every size is fixed, None when it cannot tell (no `onnx` package,
    or not an ONNX file)."""
    model = _onnx_model(source)
    if model is None:
        return None
    initializers = {t.name for t in model.graph.initializer}
    dynamic = []
    for value in model.graph.input:
        if value.name in initializers:  # old exporters list weights as inputs too
            continue
        dims = value.type.tensor_type.shape.dim
        if not value.type.tensor_type.HasField("shape") or any(
                not d.HasField("dim_value") or d.dim_value <= 0 for d in dims):
            dynamic.append(value.name)
    return dynamic


SHAPES_HINT = ("pass input_shapes=[(1, 3, 224, 224)] (on the command line, --input-shape "
               "1x3x224x224)")


def failure_hint(source: Path, shapes, returncode: int, log: str = "") -> str:
    """Why pnnx failed, as far as Kuiper can tell: its exit status, the last lines of its log
    (where pnnx and onnxruntime say what went wrong), and the fix that fits this file: a
    TorchScript file saved the wrong way, or an ONNX file with dynamic sizes and no shapes."""
    what = (f"{source}: not a PNNX model, and pnnx could not convert it (pnnx "
            f"{exit_description(returncode)})")
    tail = log_tail(log)
    if tail:
        what += f"; the end of its log: {tail}"
    if source.suffix.lower() in TORCHSCRIPT_SUFFIXES:
        what += (". A .pt/.pth file must be TorchScript, saved with "
                 "torch.jit.trace(model, example).save(path), not a state_dict or a pickled "
                 "module from torch.save")
        if not shapes:
            what += f", and pnnx may need its input shapes: {SHAPES_HINT}"
    elif not shapes:
        dynamic = dynamic_inputs(source)
        if dynamic:
            what += (f". Input(s) {', '.join(dynamic)} have dynamic sizes, which pnnx must be "
                     f"given: {SHAPES_HINT}")
        elif dynamic is None:
            what += f". If the model has dynamic input sizes, {SHAPES_HINT}"
    return what


def format_problem(param: Path) -> str | None:
    """None if pnnx wrote the format Kuiper reads, else what to do about it."""
    with open(param, "rb") as f:
        first = f.readline(64).decode("utf-8", "replace").strip()
    if first == MAGIC:
        return None
    return (f"pnnx {pnnx_version()} wrote {param.name} in a format Kuiper does not read: its "
            f"first line is '{first}', Kuiper reads format {MAGIC} (tested with pnnx "
            f"{TESTED_PNNX_VERSION}). Install that version with `{INSTALL_COMMAND}`")
