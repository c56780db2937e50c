"""The repository's promises about its own layout (kuiper/DESIGN.md: one stem, one operator)."""

from __future__ import annotations

import re
from pathlib import Path

from kuiper.core import registry

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "clkernels"


def own(backend: str) -> dict[str, type]:
    """Kuiper's own layers (a test may have loaded a plugin: its layers live elsewhere)."""
    return {t: c for t, c in registry.supported(backend).items()
            if registry.origin(c) == "kuiper"}


def _stem(cls: type) -> str:
    return cls.__module__.rsplit(".", 1)[-1]


def test_every_opencl_layer_has_a_cpu_twin_it_builds_on():
    cpu, opencl = own("cpu"), own("opencl")
    for op_type, cls in opencl.items():
        assert op_type in cpu, f"{op_type} has an OpenCL layer but no CPU layer"
        assert issubclass(cls, cpu[op_type]), (
            f"{cls.__module__}.{cls.__name__} should subclass its CPU twin "
            f"{cpu[op_type].__module__}.{cpu[op_type].__name__} (shared params and infer)")
        assert _stem(cls) == _stem(cpu[op_type]), f"{op_type}: stems differ"


def test_every_cpu_operator_has_an_opencl_twin():
    # pnnx.Attribute is folded at build time on every backend, so it never runs on a device.
    missing = sorted(set(own("cpu")) - set(own("opencl"))
                     - {"pnnx.Attribute"})
    assert not missing, f"no OpenCL layer (these would fall back to the CPU): {missing}"


def test_every_layer_stem_has_a_test_file():
    for backend in registry.BACKENDS:
        for op_type, cls in own(backend).items():
            test = ROOT / "tests" / "layers" / f"test_{_stem(cls)}.py"
            assert test.exists(), f"{op_type} ({cls.__module__}) has no {test.relative_to(ROOT)}"


def test_every_kernel_file_is_used():
    # layers, and the rooms that build kernels for them (the convolution algorithms, the GEMMs,
    # the executor's epilogue step ...)
    folders = ("layers/opencl", "layers/opencl_helpers", "layers/opencl_conv",
               "layers/opencl_gemm", "kuiper/opencl/execution")
    sources = "\n".join(p.read_text() for folder in folders
                        for p in (ROOT / folder).glob("*.py"))
    # a header may be included by a kernel file or by another header (gemm.h's families)
    includes = "\n".join(p.read_text() for p in [*KERNELS.glob("*.cl"), *KERNELS.glob("*.h")])
    stems = {_stem(c) for c in own("opencl").values()}
    for cl_file in KERNELS.glob("*.cl"):
        used = (cl_file.stem in stems or re.search(rf"[\"']{cl_file.stem}[\"']", sources))
        assert used, f"{cl_file.name} is not used by any OpenCL layer"
    for header in KERNELS.glob("*.h"):
        assert f'#include "{header.name}"' in includes, f"{header.name} is never included"


# The kernels CPU devices run, whose index arithmetic goes through index_math.h: PoCL 3.0
# compiles OpenCL's min(), max() and clamp() of ints to a call that spills the vector registers
# (clkernels/index_math.h has the measurement). conv_implicit_gemm.cl keeps min()/clamp() of
# int *vectors* (`intv`): computed once per work-item, and index_math.h is for ints.
CPU_KERNELS = ("gemm_blocked.h", "conv_direct.cl", "conv_depthwise.cl", "attention_blocks.cl",
               "maxpool.cl", "avgpool.cl", "conv2d.cl", "conv_implicit_gemm.cl")


def test_cpu_kernels_take_index_math_not_builtin_min_of_ints():
    builtin = re.compile(r"(?<![\w.])(min|max|clamp)\(")
    for name in CPU_KERNELS:
        text = (KERNELS / name).read_text()
        assert '#include "index_math.h"' in text, f"{name} should include index_math.h"
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("//")[0]
            if builtin.search(code) and "intv" not in code:
                raise AssertionError(f"{name}:{number}: {line.strip()!r} calls OpenCL's "
                                     "min/max/clamp; use index_math.h's imin/imax/iclamp")
