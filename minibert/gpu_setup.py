"""Can CuPy run minibert on this machine's GPU?  If not, one line that says why and what to install.

``backend.get_xp("cuda")`` calls :func:`require_cupy`.  CUDA's own errors name a
symptom ("CUDA driver version is insufficient for CUDA runtime version"), and the
same symptom has different fixes: no driver at all, a driver too old for this
CuPy, the CuPy for another CUDA version.  So the set-up is checked in the order
it is built up, and the first missing piece is named with its fix:

1. one CuPy package (two of them, e.g. for CUDA 12 and 13, overwrite each other's files);
2. CuPy imports;
3. an NVIDIA driver (``driverGetVersion()`` answers 0 where there is none);
4. a driver for this CuPy's CUDA major version (a CUDA 12 build runs on a CUDA 13
   driver, not the reverse);
5. a GPU that the driver shows to this process;
6. CUDA's libraries: NVRTC compiles CuPy's kernels and cuBLAS runs the matrix
   products, both loaded at their first use, so only running a kernel finds them missing.

Every error is a ``GPUSetupError`` raised ``from None``: the CUDA traceback behind it
says nothing more to a student than its message, which is kept in the line.
"""
from __future__ import annotations

import importlib.metadata
import os
import re
import sys

# CuPy's builds on PyPI ("cupy" is built from source, or comes from conda-forge)
CUPY_PACKAGES = ("cupy", "cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x")
# minibert's extra for each CUDA major version (pyproject.toml); "gpu" is the CUDA 12 one
EXTRAS = {12: "cuda12", 13: "cuda13"}
INSUFFICIENT_DRIVER, NO_DEVICE = 35, 100      # CUDA's error codes (cudaError_t)
CUDA_LIBRARY = re.compile(r"lib(nvrtc|cublas\w*|curand|cusolver|cusparse|cufft|cudart)\b|"
                          r"cannot open source file")
ON_THE_CPU = "or run on the CPU (device cpu)"

_ready = None   # the cupy module, once it passed every check: they run once per process


class GPUSetupError(RuntimeError):
    """``device="cuda"`` cannot work here; the message, one line, says why and what to install.

    ``case`` names the case: "no-cupy", "two-cupys", "broken-cupy", "no-driver", "wrong-cupy",
    "old-driver", "no-gpu", "no-cuda-libraries" or "cuda-error".
    """

    def __init__(self, message: str, case: str = "cuda-error"):
        super().__init__(f"device='cuda': {message}")
        self.case = case
        self.reason = message


def require_cupy():
    """The ``cupy`` module, checked to run kernels on a GPU; else a ``GPUSetupError``."""
    global _ready
    if _ready is not None and sys.modules.get("cupy") is _ready:
        return _ready
    found = installed_cupys()
    if len(found) > 1:
        raise _two_cupys(found)
    try:
        import cupy
    except Exception as exc:   # an ImportError, or an OSError where a library does not load
        raise _import_failed(exc, found) from None
    runtime = cupy.cuda.runtime
    built = _ask(runtime.runtimeGetVersion)   # the CUDA version this CuPy was built for
    _check_driver_and_gpu(runtime, found, built)
    try:
        _run_first_kernels(cupy)
    except Exception as exc:
        raise _kernels_failed(exc, built) from None
    _ready = cupy
    return cupy


def gpu_status() -> str:
    """One line: the GPU that ``device="cuda"`` would use, or why there is none."""
    try:
        cupy = require_cupy()
    except GPUSetupError as exc:
        return f"no GPU for minibert: {exc.reason}"
    runtime = cupy.cuda.runtime
    props = runtime.getDeviceProperties(runtime.getDevice())
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return (f"GPU: {name}, {props['totalGlobalMem'] / 2**30:.0f} GiB; NVIDIA driver for CUDA "
            f"{_cuda(runtime.driverGetVersion())}, CuPy {cupy.__version__} for CUDA "
            f"{_cuda(runtime.runtimeGetVersion())}")


def installed_cupys() -> list:
    """The CuPy packages installed (their PyPI names), read from the packages' metadata."""
    found = []
    for name in CUPY_PACKAGES:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def _check_driver_and_gpu(runtime, found, built):
    driver = _ask(runtime.driverGetVersion)   # the newest CUDA the driver runs; 0: no driver
    if driver == 0:
        raise GPUSetupError("CuPy is installed, but this machine has no NVIDIA driver: install the "
                            "driver if it has an NVIDIA GPU (nvidia-smi then lists it); in a hosted "
                            f"notebook, choose a runtime with a GPU; {ON_THE_CPU}", "no-driver")
    if driver and built and driver // 1000 < built // 1000:
        raise _driver_too_old(found, built, driver)
    try:
        count = runtime.getDeviceCount()
    except Exception as exc:       # CuPy's CUDARuntimeError: "cudaErrorNoDevice: no CUDA-capable ..."
        status = getattr(exc, "status", None)
        if status == NO_DEVICE or "cudaErrorNoDevice" in str(exc):
            raise _no_gpu(driver) from None
        if status == INSUFFICIENT_DRIVER or "cudaErrorInsufficientDriver" in str(exc):
            raise GPUSetupError(f"CuPy finds no NVIDIA driver for CUDA {_cuda(built)}, the version it is "
                                f"built for (there is none, or it is too old): install or update the driver "
                                f"(nvidia-smi shows its CUDA version at its top)", "old-driver") from None
        raise GPUSetupError(f"CuPy cannot reach the GPU ({_one_line(exc)}): check that nvidia-smi "
                            f"lists it, {ON_THE_CPU}", "cuda-error") from None
    if count == 0:
        raise _no_gpu(driver)


def _run_first_kernels(cupy):
    x = cupy.arange(4, dtype=cupy.float32).reshape(2, 2)   # a first kernel: NVRTC compiles it
    float((x * x).sum())
    float((x @ x).sum())                                    # a matrix product: cuBLAS


def _two_cupys(found):
    return GPUSetupError(
        f"{len(found)} CuPy packages are installed at once ({', '.join(found)}) and they overwrite each "
        f"other's files: pip uninstall -y {' '.join(found)}, then install one: pip install "
        f'"minibert[cuda12]" (a driver for CUDA 12 or newer) or "minibert[cuda13]" (a driver for CUDA 13; '
        f"nvidia-smi shows the driver's CUDA version at its top)", "two-cupys")


def _import_failed(exc, found):
    if isinstance(exc, ImportError) and (exc.name == "cupy" or "No module named 'cupy'" in str(exc)):
        return GPUSetupError('CuPy is not installed: pip install "minibert[gpu]" (CuPy for CUDA 12: it runs '
                             "on any NVIDIA driver for CUDA 12 or newer, the version at the top of nvidia-smi; "
                             '"minibert[cuda13]" for a CUDA 13 driver)', "no-cupy")
    if "libcuda" in str(exc):       # CuPy before version 13 loads the driver when it is imported
        return GPUSetupError("CuPy is installed, but this machine has no NVIDIA driver (libcuda does not "
                             "load): install the driver if it has an NVIDIA GPU (nvidia-smi then lists "
                             f"it); {ON_THE_CPU}", "no-driver")
    name = found[0] if found else "cupy"
    if CUDA_LIBRARY.search(str(exc)):   # a CuPy that loads CUDA's libraries when it is imported
        return _no_libraries(exc, _cuda_major_of(name) or 12)
    extra = EXTRAS.get(_cuda_major_of(name), "gpu")
    return GPUSetupError(f"{name} is installed but does not import ({_one_line(exc)}): reinstall it: "
                         f'pip uninstall -y {name}, then pip install "minibert[{extra}]"', "broken-cupy")


def _driver_too_old(found, built, driver):
    extra = EXTRAS.get(driver // 1000)
    if extra is None:
        return GPUSetupError(f"the NVIDIA driver runs CUDA up to {_cuda(driver)}, and minibert's CuPy needs "
                             f"CUDA 12 or newer: update the NVIDIA driver", "old-driver")
    uninstall = f"pip uninstall -y {found[0]}" if found else "uninstall this CuPy"
    name = found[0] if found else "this CuPy"
    return GPUSetupError(f"the wrong CuPy for this driver: {name} is built for CUDA {_cuda(built)}, but the "
                         f"NVIDIA driver runs CUDA up to {_cuda(driver)}: {uninstall}, then pip install "
                         f'"minibert[{extra}]" (or update the driver)', "wrong-cupy")


def _no_gpu(driver):
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None:
        return GPUSetupError(f"no GPU is visible to this process: CUDA_VISIBLE_DEVICES={hidden!r} hides "
                             f"them; set it to a GPU's number (nvidia-smi lists them) or unset it, "
                             f"{ON_THE_CPU}", "no-gpu")
    return GPUSetupError(f"CuPy and the NVIDIA driver (CUDA {_cuda(driver)}) are installed, but no GPU is "
                         f"visible: check that nvidia-smi lists one, {ON_THE_CPU}", "no-gpu")


def _kernels_failed(exc, built):
    major = (built or 12000) // 1000
    extra = EXTRAS.get(major, "gpu")
    if CUDA_LIBRARY.search(str(exc)):
        return _no_libraries(exc, major)
    return GPUSetupError(f"a first small computation failed on the GPU ({_one_line(exc)}): check that "
                         f'nvidia-smi works, update the NVIDIA driver or reinstall CuPy: pip install '
                         f'"minibert[{extra}]"', "cuda-error")


def _no_libraries(exc, major):
    return GPUSetupError(f"CuPy is installed, but CUDA's libraries are not ({_one_line(exc)}): pip install "
                         f'"minibert[{EXTRAS.get(major, "gpu")}]" brings them (CuPy\'s [ctk] extra), or install '
                         f"the CUDA Toolkit {major}", "no-cuda-libraries")


def _cuda_major_of(package):
    """The CUDA major version a CuPy package is built for: cupy-cuda13x -> 13; None for "cupy"."""
    m = re.fullmatch(r"cupy-cuda(\d+)x", package)
    return int(m.group(1)) if m else None


def _ask(query):
    """A version CuPy reports, or None where it cannot say."""
    try:
        return int(query())
    except Exception:
        return None


def _cuda(version) -> str:
    """CUDA's version number as people write it: 12040 -> "12.4"."""
    return "unknown" if version is None else f"{version // 1000}.{version % 1000 // 10}"


def _one_line(exc, limit=160) -> str:
    """The line of an error that says what went wrong: CuPy's import error wraps it in a banner."""
    lines = [s.strip() for s in str(exc).splitlines() if s.strip().strip("=-*")]
    after = [lines[i + 1] for i, s in enumerate(lines[:-1]) if s == "Original error:"]
    line = (after or lines or [type(exc).__name__])[0]
    return line if len(line) <= limit else line[:limit - 3] + "..."
