#!/usr/bin/env python
"""Run pnnx's own operator test files through Kuiper (CPU and OpenCL) and classify each.

pnnx's tests (tools/pnnx/tests/test_*.py for the TorchScript route, tools/pnnx/tests/onnx/test_*.py
for the ONNX route) are read straight out of a git object store (nothing is copied into this repo).
For every file, a child process:

  1. writes the file into a fresh temporary folder, chdirs there and imports it;
  2. runs its `test()` with the export step intercepted, to get the model and its example inputs:
       - TorchScript route: `torch.jit.trace(net, inputs)` is replaced by a recorder that raises;
       - ONNX route: the test's own `torch.onnx.export(...)` call runs for real (retried with
         dynamo=False if the default exporter fails) and then raises; files written with onnxscript
         are caught at `onnxruntime.InferenceSession.run(...)`, whose outputs are the reference;
     `test()` returning without reaching that point = not runnable (a torch-version gate);
  3. computes the reference with PyTorch (`model(*inputs)`; ONNX-Runtime for onnxscript files);
  4. exports: `pnnx.export(model, "model.pt", inputs)` (TorchScript) or `pnnx.convert(file.onnx,
     inputs)` (ONNX), and checks that a `*.pnnx.param` appeared;
  5. loads that param with `kuiper.load(..., backend=b)` for b in cpu, opencl, runs `forward` on
     the same inputs and compares every output with the reference.

Classes per file and backend: pass, wrong-numbers, kuiper-error, crash, timeout, export-failed,
not-runnable, harness (the harness could not get the model's inputs).

    python tests/pnnx_suite/run_pnnx_suite.py --route ts --only F_conv     # a few files
    python tests/pnnx_suite/run_pnnx_suite.py --route all --markdown tests/pnnx_suite/RESULTS.md
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

DEFAULT_REPO = "/work/.mirror/Tencent+ncnn/repo"
TESTS_DIR = "tools/pnnx/tests"
BACKENDS = ("cpu", "opencl")
ROUTES = {"ts": TESTS_DIR + "/", "onnx": TESTS_DIR + "/onnx/"}
HERE = Path(__file__).resolve()
ENGINE_ROOT = HERE.parents[2]  # /work/main: kuiper is imported from here


# --------------------------------------------------------------------------------------------
# child side: one test file
# --------------------------------------------------------------------------------------------

class _Captured(Exception):
    """Raised by the patched exporters once the model and its inputs are known."""


class _Progress:
    """The child's result, rewritten after every stage so a crash or a timeout leaves a trace."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict = {"stage": "start", "backends": {}, "notes": []}
        self.save()

    def set(self, **kw):
        self.data.update(kw)
        self.save()

    def backend(self, name, status, message="", **extra):
        self.data["backends"][name] = {"status": status, "message": message, **extra}
        self.save()

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {line}"[:300]


def _flatten(obj, out):
    import torch
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _flatten(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _flatten(o, out)
    elif obj is None:
        pass
    else:
        import numpy as np
        out.append(torch.as_tensor(np.asarray(obj)))
    return out


def _as_numpy(t):
    import torch
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()
    import numpy as np
    return np.asarray(t)


def _compare(expected: list, got: list) -> tuple[bool, str]:
    """True when every output matches; otherwise a one-line reason."""
    import numpy as np
    if len(expected) != len(got):
        return False, f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        e = _as_numpy(e)
        g = np.asarray(g)
        if e.shape != g.shape:
            return False, f"output {i}: shape {tuple(g.shape)}, expected {tuple(e.shape)}"
        if np.iscomplexobj(e) or np.iscomplexobj(g):
            pairs = [(np.real(e), np.real(g)), (np.imag(e), np.imag(g))]
        else:
            pairs = [(e, g)]
        for ee, gg in pairs:
            if ee.dtype == np.bool_ or np.issubdtype(ee.dtype, np.integer):
                if ee.size and not np.array_equal(ee, gg):
                    bad = int(np.count_nonzero(ee != gg))
                    return False, (f"output {i} ({ee.dtype}): {bad}/{ee.size} elements differ "
                                   f"(got dtype {gg.dtype})")
                continue
            ee = ee.astype(np.float64)
            try:
                gg = gg.astype(np.float64)
            except (TypeError, ValueError):
                return False, f"output {i}: got dtype {gg.dtype}, expected {e.dtype}"
            finite = np.isfinite(ee)
            scale = float(np.abs(ee[finite]).max()) if finite.any() else 1.0
            atol = 1e-3 * scale + 1e-6
            if ee.size and not np.allclose(gg, ee, rtol=1e-3, atol=atol, equal_nan=True):
                with np.errstate(invalid="ignore"):
                    diff = np.abs(gg - ee)
                diff = np.where(np.isnan(diff) & (np.isnan(ee) & np.isnan(gg)), 0, diff)
                worst = float(np.nanmax(diff)) if np.isfinite(diff).any() else float("nan")
                n_nan = int(np.count_nonzero(np.isnan(gg) != np.isnan(ee)))
                nan_note = f", {n_nan} NaN mismatches" if n_nan else ""
                return False, (f"output {i} {tuple(e.shape)}: max |diff| {worst:.4g} "
                               f"(max |expected| {scale:.4g}" + nan_note + ")")
    return True, ""


def _missing_module(e: BaseException) -> str | None:
    if isinstance(e, ModuleNotFoundError) and e.name:
        return e.name.split(".")[0]
    return None


def child_main(repo: str, ref: str, relpath: str, progress_path: str) -> int:
    prog = _Progress(progress_path)
    name = Path(relpath).stem
    src = subprocess.run(["git", "-C", repo, "show", f"{ref}:{relpath}"],
                         capture_output=True, text=True, check=True).stdout
    work = os.getcwd()
    Path(work, name + ".py").write_text(src)
    sys.path.insert(0, work)
    sys.path.insert(1, str(ENGINE_ROOT))

    def not_runnable(msg):
        prog.set(stage="done", overall="not-runnable", message=msg)
        return 0

    # -- 1. import the test file
    prog.set(stage="import")
    try:
        import importlib
        mod = importlib.import_module(name)
    except SystemExit:
        return not_runnable("module exits on import")
    except BaseException as e:  # noqa: BLE001
        m = _missing_module(e)
        if m:
            return not_runnable(f"needs {m}")
        prog.set(stage="done", overall="harness", message="import failed: " + _first_line(e))
        return 0

    # -- 2. run test() with the exporters intercepted
    import torch
    captured: dict = {}
    real_trace = torch.jit.trace
    real_onnx_export = torch.onnx.export

    def fake_trace(func, example_inputs=None, *args, **kwargs):
        if captured:
            raise _Captured()
        captured.update(kind="ts", model=func, inputs=example_inputs,
                        check_trace=kwargs.get("check_trace", True))
        raise _Captured()

    def fake_onnx_export(model, args=(), f=None, *a, **kw):
        if captured:
            raise _Captured()
        note = ""
        if os.environ.get("PNNX_SUITE_ONNX_DYNAMO") == "0":
            kw["dynamo"] = False
        try:
            real_onnx_export(model, args, f, *a, **kw)
        except Exception as e:  # noqa: BLE001
            if "dynamo" in kw:
                captured.update(kind="onnx-export-failed", message=_first_line(e))
                raise _Captured() from None
            try:
                kw2 = dict(kw, dynamo=False)
                real_onnx_export(model, args, f, *a, **kw2)
                note = ("default (dynamo) torch.onnx.export failed, used dynamo=False: "
                        + _first_line(e))
            except Exception as e2:  # noqa: BLE001
                captured.update(kind="onnx-export-failed", message=_first_line(e2))
                raise _Captured() from None
        exporter = "dynamo" if kw.get("dynamo", True) and not note else "torchscript"
        captured.update(kind="onnx", model=model, inputs=args, onnx_path=str(f), note=note,
                        exporter=exporter)
        raise _Captured()

    torch.jit.trace = fake_trace
    torch.onnx.export = fake_onnx_export
    try:
        import onnxruntime as ort
        real_run = ort.InferenceSession.run

        def fake_run(self, output_names, input_feed, *a, **kw):
            outs = real_run(self, output_names, input_feed, *a, **kw)
            if not captured:
                names = [i.name for i in self.get_inputs()]
                captured.update(kind="ort", onnx_path=self._model_path,
                                inputs=[input_feed[n] for n in names if n in input_feed],
                                reference=list(outs))
            raise _Captured()
        ort.InferenceSession.run = fake_run
    except ImportError:
        pass
    real_system = os.system
    os.system = lambda cmd: 0  # never run the test's own `../src/pnnx ...`

    prog.set(stage="capture")
    torch.manual_seed(0)
    try:
        ret = mod.test()
    except _Captured:
        ret = None
    except SystemExit:
        ret = None
    except BaseException as e:  # noqa: BLE001
        m = _missing_module(e)
        if m:
            return not_runnable(f"needs {m}")
        if not captured:
            prog.set(stage="done", overall="harness",
                     message="could not get inputs: test() raised " + _first_line(e))
            return 0
    finally:
        torch.jit.trace = real_trace
        torch.onnx.export = real_onnx_export
        os.system = real_system

    if not captured:
        if ret is True or ret is None:
            return not_runnable("test() returned before exporting (torch version gate)")
        return not_runnable(f"test() returned {ret!r} before exporting")

    if captured["kind"] == "onnx-export-failed":
        prog.set(stage="done", overall="export-failed",
                 message="torch.onnx.export: " + captured["message"])
        return 0

    inputs = captured["inputs"]
    if captured["kind"] == "ort":
        import numpy as np
        inputs = [torch.from_numpy(np.asarray(x)) for x in inputs]
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    if not all(isinstance(x, torch.Tensor) for x in inputs):
        kinds = sorted({type(x).__name__ for x in inputs if not isinstance(x, torch.Tensor)})
        prog.set(stage="done", overall="harness",
                 message="could not get inputs: non-tensor example inputs " + ",".join(kinds))
        return 0
    inputs = tuple(x.detach() for x in inputs)

    def clones():
        return tuple(x.clone() for x in inputs)

    # -- 3. the reference
    prog.set(stage="reference")
    if captured["kind"] == "ort":
        expected = [torch.from_numpy(__import__("numpy").asarray(o)) for o in captured["reference"]]
    else:
        model = captured["model"]
        try:
            with torch.no_grad():
                expected = _flatten(model(*clones()), [])
        except BaseException as e:  # noqa: BLE001
            prog.set(stage="done", overall="harness",
                     message="reference run failed: " + _first_line(e))
            return 0
    if captured.get("note"):
        prog.data["notes"].append(captured["note"])
    if captured.get("exporter"):
        prog.data["exporter"] = captured["exporter"]

    # -- 4. pnnx
    prog.set(stage="export")
    import pnnx
    log = open(os.path.join(work, "pnnx.log"), "w")
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    export_error = None
    try:
        if captured["kind"] == "ts":
            param = Path(work, "model.pnnx.param")
            pnnx.export(captured["model"], "model.pt", clones(),
                        check_trace=captured["check_trace"])
        else:
            onnx_path = captured["onnx_path"]
            param = Path(work, Path(onnx_path).stem + ".pnnx.param")
            pnnx.convert(onnx_path, list(clones()))
    except BaseException as e:  # noqa: BLE001  (pnnx.convert imports the generated *_pnnx.py)
        export_error = e
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        log.close()
    if not param.exists():
        log_lines = Path(work, "pnnx.log").read_text(errors="replace").splitlines()
        tail = [ln for ln in log_lines if ln.strip()]
        if export_error:
            msg = _first_line(export_error)
        else:
            msg = tail[-1] if tail else "no param written"
        prog.set(stage="done", overall="export-failed", message=msg[:300])
        return 0
    if export_error is not None:
        prog.data["notes"].append("pnnx wrote the param; importing its generated python failed: "
                                  + _first_line(export_error))

    # -- 5. Kuiper
    import numpy as np

    import kuiper
    np_inputs = [_as_numpy(x).copy() for x in inputs]
    for backend in BACKENDS:
        prog.set(stage=backend)
        try:
            graph = kuiper.load(str(param), backend=backend)
            outs = graph.forward(*[a.copy() for a in np_inputs])
        except BaseException as e:  # noqa: BLE001
            prog.backend(backend, "kuiper-error", _first_line(e), error_type=type(e).__name__)
            continue
        fallbacks = ([f"{op.type}" for op in getattr(graph, "fallbacks", [])]
                     if backend == "opencl" else [])
        try:
            ok, why = _compare(expected, list(outs))
        except BaseException as e:  # noqa: BLE001
            prog.backend(backend, "harness", "comparison failed: " + _first_line(e))
            continue
        prog.backend(backend, "pass" if ok else "wrong-numbers", why,
                     fallbacks=sorted(set(fallbacks)))
    prog.set(stage="done", overall="ran")
    return 0


# --------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------

def list_files(repo: str, ref: str, route: str) -> list[str]:
    prefix = ROUTES[route]
    out = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", ref, prefix],
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(p for p in out if re.fullmatch(re.escape(prefix) + r"test_[^/]*\.py", p))


def run_one(repo: str, ref: str, relpath: str, timeout: float, keep: bool) -> dict:
    """One file; a crash before Kuiper is involved (torch itself, while the test builds its
    inputs, has been seen to abort at random) is retried once."""
    r = _run_one(repo, ref, relpath, timeout, keep)
    b = r["backends"]["cpu"]
    if b["status"] == "crash" and " during " in b["message"] and \
            b["message"].split(" during ")[1].split(":")[0] in ("start", "import", "capture",
                                                                 "reference"):
        first = b["message"]
        r = _run_one(repo, ref, relpath, timeout, keep)
        r["notes"].append("retried after a crash before Kuiper ran: " + first)
    return r


def _run_one(repo: str, ref: str, relpath: str, timeout: float, keep: bool) -> dict:
    work = tempfile.mkdtemp(prefix="pnnx_suite_")
    progress = os.path.join(work, "_progress.json")
    cmd = [sys.executable, str(HERE), "--child", relpath, "--repo", repo, "--ref", ref,
           "--progress", progress]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    if ONNX_DYNAMO_OFF:
        env["PNNX_SUITE_ONNX_DYNAMO"] = "0"
    t0 = time.time()
    with open(os.path.join(work, "_child.log"), "w") as logf:
        proc = subprocess.Popen(cmd, cwd=work, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and the pnnx it may have started
            except ProcessLookupError:
                pass
            rc = proc.wait()
    elapsed = time.time() - t0
    try:
        data = json.loads(Path(progress).read_text())
    except (OSError, ValueError):
        data = {"stage": "start", "backends": {}, "notes": []}
    log_lines = Path(work, "_child.log").read_text(errors="replace").splitlines()
    log_tail = [ln for ln in log_lines if ln.strip()]
    result = {"file": relpath, "seconds": round(elapsed, 1), "notes": data.get("notes", []),
              "backends": {}, "exporter": data.get("exporter", "")}
    stage = data.get("stage", "start")
    if stage == "done" and data.get("overall") != "ran":
        for b in BACKENDS:
            result["backends"][b] = {"status": data["overall"], "message": data.get("message", "")}
    elif stage in ("start", "import", "capture", "reference", "export"):
        # died before Kuiper was involved
        if timed_out:
            if stage == "export":
                status, msg = ("export-failed", f"pnnx export did not finish in {timeout:.0f} s")
            else:
                status, msg = ("timeout", f"killed after {timeout:.0f} s during {stage}")
        else:
            how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
            last = log_tail[-1][:200] if log_tail else ""
            status = "export-failed" if stage == "export" else "crash"
            msg = f"{how} during {stage}" + (f": {last}" if last else "")
        for b in BACKENDS:
            result["backends"][b] = {"status": status, "message": msg}
    else:
        for b in BACKENDS:
            if b in data.get("backends", {}):
                result["backends"][b] = data["backends"][b]
            elif timed_out:
                result["backends"][b] = {"status": "timeout",
                                         "message": f"killed after {timeout:.0f} s during {stage}"}
            else:
                how = f"signal {-rc}" if rc < 0 else f"exit {rc}"
                last = log_tail[-1][:200] if log_tail else ""
                result["backends"][b] = {"status": "crash",
                                         "message": f"{how} during {stage}"
                                         + (f": {last}" if last else "")}
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        result["workdir"] = work
    return result


ONNX_DYNAMO_OFF = False  # --onnx-exporter torchscript

RUNNABLE_EXCLUDED = ("not-runnable", "harness", "export-failed")


def summarize(results: list[dict]) -> dict:
    summary = {}
    for route in ROUTES:
        rs = [r for r in results if route_of(r["file"]) == route]
        s = {"files": len(rs)}
        for b in BACKENDS:
            counts: dict[str, int] = {}
            for r in rs:
                st = r["backends"][b]["status"]
                counts[st] = counts.get(st, 0) + 1
            runnable = sum(v for k, v in counts.items() if k not in RUNNABLE_EXCLUDED)
            s[b] = {"pass": counts.get("pass", 0), "runnable": runnable, "counts": counts}
        summary[route] = s
    return summary


def route_of(relpath: str) -> str:
    return "onnx" if relpath.startswith(ROUTES["onnx"]) else "ts"


# Results checked by hand, where a failure is the comparison's doing rather than Kuiper's.
CAVEATS = {
    "test_torch_topk.py": "checked by hand: output 2 is `torch.topk(..., sorted=False)`, "
                          "whose order PyTorch leaves unspecified; sorted, Kuiper's values equal "
                          "PyTorch's and its indices gather the same values, on both backends",
    "test_Tensor_new_empty.py": "the model returns `new_empty` tensors (uninitialised memory, "
                                "folded into constants by pnnx): there are no numbers to compare, "
                                "shapes match",
    "test_transformers_longformer_attention.py":
        "transformers 4.52.1; the 4 operators are `torch.as_strided` (no layer): Longformer's "
        "_chunk calls it on a transposed view, with strides of that view's storage "
        "((12,1152,576,1) for a (48,4,4,12) input whose contiguous strides are (192,48,12,1)); "
        "Kuiper's tensors are contiguous and keep no storage layout, so a layer alone cannot "
        "reproduce it",
}


def _caveat(relpath: str) -> str:
    c = CAVEATS.get(relpath[len(TESTS_DIR) + 1:])
    return f" — *{c}*" if c else ""


def _totals_rows(summary: dict, label_suffix: str = "") -> list[str]:
    rows = []
    for route, s in summary.items():
        if not s["files"]:
            continue
        for b in BACKENDS:
            c = s[b]["counts"]
            label = "TorchScript" if route == "ts" else "ONNX"
            rows.append(f"| {label}{label_suffix} | {s['files']} | {b} | "
                        f"**{s[b]['pass']} / {s[b]['runnable']}** | {c.get('wrong-numbers', 0)} | "
                        f"{c.get('kuiper-error', 0)} | {c.get('crash', 0)} | "
                        f"{c.get('timeout', 0)} | {c.get('export-failed', 0)} | "
                        f"{c.get('not-runnable', 0)} | {c.get('harness', 0)} |")
    return rows


def _status_line(r: dict) -> str:
    bc, bo = r["backends"]["cpu"], r["backends"]["opencl"]
    if (bc["status"], bc["message"]) == (bo["status"], bo["message"]):
        return f"both: **{bc['status']}** {md(bc['message'])}"
    return (f"cpu: **{bc['status']}** {md(bc['message'])}; "
            f"opencl: **{bo['status']}** {md(bo['message'])}")


def write_markdown(path: str, results: list[dict], meta: dict, compare: dict | None = None) -> None:
    summary = summarize(results)
    L = ["# pnnx's own operator tests through Kuiper", "",
         f"Generated by `tests/pnnx_suite/run_pnnx_suite.py` on {meta['date']}.", "",
         f"- machine: {meta['machine']}",
         f"- pnnx tests: `{meta['repo']}` at `{meta['ref']}` ({meta['commit'][:12]}); "
         f"pnnx {meta['pnnx']}, torch {meta['torch']}",
         f"- per-file timeout {meta['timeout']:.0f} s, {meta['jobs']} files at a time; "
         f"wall time {meta['wall_s'] / 60:.1f} min",
         f"- scope: {meta['scope']}", "",
         "\"runnable\" = the harness got the model and inputs and pnnx produced a `.pnnx.param` "
         "(i.e. not `not-runnable`, `harness` or `export-failed`).", "",
         "## Totals", "",
         "| route | files | backend | pass / runnable | wrong-numbers | kuiper-error | crash |"
         " timeout | export-failed | not-runnable | harness |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    L += _totals_rows(summary)
    L += ["", "## Runnable files that do not pass", "",
          "One line per file; when both backends fail the same way it is shown once.", ""]
    for route in ROUTES:
        rs = [r for r in results if route_of(r["file"]) == route]
        bad = [r for r in rs if any(r["backends"][b]["status"] not in ("pass",) + RUNNABLE_EXCLUDED
                                    for b in BACKENDS)]
        if not rs:
            continue
        L += [f"### {'TorchScript' if route == 'ts' else 'ONNX'} route ({len(bad)} files)", ""]
        for r in bad:
            name = r["file"][len(TESTS_DIR) + 1:]
            L.append(f"- `{name}` — {_status_line(r)}{_caveat(r['file'])}")
        L.append("")
    if compare:
        cres = compare["results"]
        L += ["## ONNX route again, with `dynamo=False` forced", "",
              f"Same harness, `--onnx-exporter torchscript` ({compare['meta']['date']}): every "
              "`torch.onnx.export` call of the ONNX-route tests uses the TorchScript exporter, "
              "which the tests were written against (torch 2.13 defaults to the dynamo "
              "exporter).", "",
              "| route | files | backend | pass / runnable | wrong-numbers | kuiper-error | crash |"
              " timeout | export-failed | not-runnable | harness |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        L += _totals_rows(summarize(cres), " (dynamo=False)")
        base = {r["file"]: r for r in results}
        diff = [r for r in cres if r["file"] in base and
                any(r["backends"][b]["status"] != base[r["file"]]["backends"][b]["status"]
                    for b in BACKENDS)]
        L += ["", f"Files whose result differs from the default-exporter run ({len(diff)}):", ""]
        for r in diff:
            L.append(f"- `{r['file'][len(TESTS_DIR) + 1:]}` — default exporter: "
                     f"{_status_line(base[r['file']])}; dynamo=False: {_status_line(r)}")
        L.append("")
    L += ["## Not counted as runnable", ""]
    for route in ROUTES:
        rs = [r for r in results if route_of(r["file"]) == route
              and r["backends"]["cpu"]["status"] in RUNNABLE_EXCLUDED]
        if not rs:
            continue
        L += [f"### {'TorchScript' if route == 'ts' else 'ONNX'} route ({len(rs)} files)", ""]
        groups: dict[str, list[str]] = {}
        for r in rs:
            b = r["backends"]["cpu"]
            groups.setdefault(f"{b['status']}: {md(b['message'])}", []).append(
                Path(r["file"]).name.removeprefix("test_").removesuffix(".py"))
        for key, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            L.append(f"- {key} ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
        L.append("")
    notes = [(r["file"], n) for r in results for n in r.get("notes", [])]
    fb: dict[str, list[str]] = {}
    for r in results:
        for t in r["backends"]["opencl"].get("fallbacks", []) or []:
            fb.setdefault(t, []).append(r["file"][len(TESTS_DIR) + 1:])
    if fb:
        L += ["## OpenCL host fallbacks", "",
              "Operator types that ran on the host under OpenCL (`graph.fallbacks`), in files that "
              "otherwise ran:", ""]
        L += [f"- `{t}`: " + ", ".join(f"`{f}`" for f in fs)
              for t, fs in sorted(fb.items(), key=lambda kv: -len(kv[1]))]
        L.append("")
    if notes:
        L += ["## Notes from the harness", ""]
        L += [f"- `{f[len(TESTS_DIR) + 1:]}`: {md(n)}" for f, n in notes]
        L.append("")
    Path(path).write_text("\n".join(L))


def md(s: str) -> str:
    s = re.sub(r"/tmp/pnnx_suite_\w+/", "", s)
    s = re.sub(r"\x1b\[[0-9;]*m", "", s)
    return s.replace("|", "\\|").replace("\n", " ")


def parent_main(args) -> int:
    files: list[str] = []
    for route in (["ts", "onnx"] if args.route == "all" else [args.route]):
        files += list_files(args.repo, args.ref, route)
    if args.only:
        files = [f for f in files if any(re.search(p, f) for p in args.only)]
    if args.limit:
        files = files[:args.limit]
    done: dict[str, dict] = {}
    old_meta = None
    if args.resume and os.path.exists(args.json):
        old = json.loads(Path(args.json).read_text())
        old_meta = old.get("meta")
        for r in old["results"]:
            done[r["file"]] = r
    todo = [f for f in files if f not in done]
    print(f"{len(files)} files ({len(files) - len(todo)} from {args.json}), "
          f"{args.jobs} at a time", flush=True)
    t0 = time.time()
    results = {f: done[f] for f in files if f in done}
    meta = old_meta or gather_meta(args)
    previous_wall = meta.get("wall_s", 0.0)

    def dump():
        ordered = [results[f] for f in files if f in results]
        Path(args.json).write_text(json.dumps({"meta": meta, "results": ordered}, indent=1))
        return ordered

    with cf.ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(run_one, args.repo, args.ref, f, args.timeout, args.keep): f
                for f in todo}
        for i, fut in enumerate(cf.as_completed(futs), 1):
            f = futs[fut]
            try:
                r = fut.result()
            except Exception as e:  # noqa: BLE001
                r = {"file": f, "seconds": 0, "notes": [traceback.format_exc()[-300:]],
                     "backends": {b: {"status": "harness", "message": _first_line(e)}
                                  for b in BACKENDS}}
            results[f] = r
            st = " ".join(f"{b}={r['backends'][b]['status']}" for b in BACKENDS)
            msg = r["backends"]["cpu"]["message"] or r["backends"]["opencl"]["message"]
            print(f"[{i}/{len(todo)}] {f[len(TESTS_DIR) + 1:]} {r['seconds']}s {st} {msg[:120]}",
                  flush=True)
            if i % 10 == 0:
                dump()
    ordered = dump()
    meta["wall_s"] = time.time() - t0 + previous_wall
    Path(args.json).write_text(json.dumps({"meta": meta, "results": ordered}, indent=1))
    summary = summarize(ordered)
    for route, s in summary.items():
        if s["files"]:
            print(route, s["files"], "files:",
                  ", ".join(f"{b} {s[b]['pass']}/{s[b]['runnable']}" for b in BACKENDS))
    if args.markdown:
        write_markdown(args.markdown, ordered, meta)
        print("wrote", args.markdown)
    return 0


def gather_meta(args) -> dict:
    import importlib.metadata as md_
    commit = subprocess.run(["git", "-C", args.repo, "rev-parse", args.ref], capture_output=True,
                            text=True).stdout.strip()
    try:
        torch_v = md_.version("torch")
    except Exception:  # noqa: BLE001
        torch_v = "?"
    try:
        pnnx_v = md_.version("pnnx")
    except Exception:  # noqa: BLE001
        pnnx_v = "?"
    return {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": args.machine, "repo": args.repo, "ref": args.ref, "commit": commit,
            "torch": torch_v, "pnnx": pnnx_v, "timeout": args.timeout, "jobs": args.jobs,
            "scope": args.scope or (args.route + (f", only {args.only}" if args.only else "")),
            "wall_s": 0.0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--route", choices=["ts", "onnx", "all"], default="all")
    ap.add_argument("--only", nargs="*", help="regexes on the file path; keep files matching any")
    ap.add_argument("--limit", type=int, default=0, help="run only the first N files")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--repo", default=DEFAULT_REPO, help="git dir holding ncnn (tools/pnnx/tests)")
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--json",
                    default=os.path.join(tempfile.gettempdir(), "pnnx_suite_results.json"),
                    help="raw results (rewritten as the run goes)")
    ap.add_argument("--resume", action="store_true", help="skip files already in --json")
    ap.add_argument("--markdown",
                    help="write a results table here (e.g. tests/pnnx_suite/RESULTS.md)")
    ap.add_argument("--machine", default="2-core VM, PoCL 3.0 (CPU device) for OpenCL")
    ap.add_argument("--scope", default="")
    ap.add_argument("--keep", action="store_true", help="keep each file's temporary folder")
    ap.add_argument("--onnx-exporter", choices=["default", "torchscript"], default="default",
                    help="ONNX route: torch.onnx.export as each test calls it (torch's default, "
                         "dynamo in torch>=2.9, falling back to dynamo=False), or always "
                         "dynamo=False")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--progress", help=argparse.SUPPRESS)
    ap.add_argument("--report-only", action="store_true",
                    help="only rewrite --markdown from --json")
    ap.add_argument("--compare-json", help="with --report-only: a second run of the ONNX route "
                                           "(--onnx-exporter torchscript) to add to the table")
    args = ap.parse_args(argv)
    global ONNX_DYNAMO_OFF
    ONNX_DYNAMO_OFF = args.onnx_exporter == "torchscript"
    if args.child:
        return child_main(args.repo, args.ref, args.child, args.progress)
    if args.report_only:
        data = json.loads(Path(args.json).read_text())
        compare = json.loads(Path(args.compare_json).read_text()) if args.compare_json else None
        write_markdown(args.markdown, data["results"], data["meta"], compare)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
