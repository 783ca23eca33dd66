"""device="cuda" on a machine where it cannot work: one line that names the case and what to install.

No GPU is needed: a stand-in ``cupy`` package, written into a temporary folder and
put first on the import path, answers as CuPy does on each kind of machine (the same
calls, error codes and messages as CuPy's ``cupy_backends/cuda/api/runtime.pyx``,
``cupy/_environment.py`` and cuda-pathfinder). Beside it, a ``.dist-info`` folder per
CuPy package makes that package look installed.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import minibert as mb
from minibert import gpu_setup
from minibert.backend import GPUSetupError, get_xp, gpu_status
from minibert.cli import main

ROOT = Path(__file__).resolve().parents[1]

# what CuPy's import raises when a compiled module of it does not load (cupy/__init__.py)
IMPORT_BANNER = """
================================================================
Failed to import CuPy.

If you installed CuPy via wheels (cupy-cudaXXX or cupy-rocm-X-X), make sure that the package matches with the version of CUDA or ROCm installed.

Original error:
  ImportError: {cause}
================================================================
"""
# cuda-pathfinder's message where a library is in none of the places it searches
NOT_FOUND = 'Failure finding "{lib}": No such file: {lib}*\n  listdir("/usr/local/cuda/lib64"): no such folder'

RUNTIME = '''\
"""A stand-in for cupy.cuda.runtime: the answers of one machine's driver and GPUs."""
_ERRORS = {35: "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
           100: "cudaErrorNoDevice: no CUDA-capable device is detected",
           999: "cudaErrorUnknown: unknown error"}


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        self.status = status
        super().__init__(_ERRORS[status])


def driverGetVersion():
    if DRIVER is None:
        raise CUDARuntimeError(35)
    return DRIVER


def runtimeGetVersion():
    return RUNTIME


def getDeviceCount():
    if COUNT_ERROR:
        raise CUDARuntimeError(COUNT_ERROR)
    return GPUS


def getDevice():
    return 0


def getDeviceProperties(device):
    return {"name": b"Stand-in GPU", "totalGlobalMem": 16 * 2**30}
'''

CUPY = '''\
"""A stand-in for cupy: NumPy arrays, and the failures of a first kernel where a library is missing."""
import numpy

from . import cuda

if IMPORT_ERROR:
    raise ImportError(IMPORT_ERROR)
__version__ = "14.2.0"
float32 = numpy.float32


class DynamicLibNotFoundError(RuntimeError):
    """cuda.pathfinder's error: CuPy loads NVRTC with it on the first kernel it compiles."""


class _Array(numpy.ndarray):
    def __matmul__(self, other):
        if MISSING == "cublas":    # CuPy loads cuBLAS at the first matrix product, and turns the error into this
            raise ImportError(NOT_FOUND.format(lib="libcublas.so"))
        return numpy.asarray(self) @ numpy.asarray(other)


def arange(*args, **kwargs):
    if MISSING == "nvrtc":
        raise DynamicLibNotFoundError(NOT_FOUND.format(lib="libnvrtc.so"))
    return numpy.arange(*args, **kwargs).view(_Array)
'''


def write_fake_cupy(folder, packages=("cupy-cuda12x",), driver=12040, runtime=12090, gpus=1,
                    count_error=0, import_error="", missing=""):
    """A stand-in ``cupy`` in ``folder``, for a driver for CUDA ``driver`` and ``packages`` installed."""
    package = folder / "cupy"
    (package / "cuda").mkdir(parents=True)
    settings = (f"DRIVER, RUNTIME, GPUS, COUNT_ERROR = {driver!r}, {runtime!r}, {gpus!r}, {count_error!r}\n"
                f"IMPORT_ERROR, MISSING, NOT_FOUND = {import_error!r}, {missing!r}, {NOT_FOUND!r}\n")
    (package / "cuda" / "runtime.py").write_text(settings + RUNTIME)
    (package / "cuda" / "__init__.py").write_text("from . import runtime\n")
    (package / "__init__.py").write_text(settings + CUPY)
    for name in packages:
        info = folder / f"{name.replace('-', '_')}-14.2.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 14.2.0\n")
    return folder


# (the stand-in's settings, the case, what the line says)
CASES = {
    "no driver": (dict(driver=0, count_error=35), "no-driver",
                  ["has no NVIDIA driver", "install the driver", "nvidia-smi"]),
    "no driver, an older CuPy": (dict(import_error=IMPORT_BANNER.format(
        cause="libcuda.so.1: cannot open shared object file: No such file or directory")), "no-driver",
                                 ["has no NVIDIA driver", "libcuda does not load"]),
    "no GPU": (dict(gpus=0), "no-gpu", ["driver (CUDA 12.4) are installed, but no GPU is visible", "nvidia-smi"]),
    "no device": (dict(count_error=100), "no-gpu", ["no GPU is visible"]),
    "CuPy for CUDA 13 on a CUDA 12 driver": (
        dict(packages=("cupy-cuda13x",), runtime=13000, count_error=35), "wrong-cupy",
        ["the wrong CuPy for this driver: cupy-cuda13x is built for CUDA 13.0, but the NVIDIA driver runs CUDA "
         'up to 12.4: pip uninstall -y cupy-cuda13x, then pip install "minibert[cuda12]"']),
    "a CUDA 11 driver": (dict(driver=11080, count_error=35), "old-driver",
                         ["runs CUDA up to 11.8", "update the NVIDIA driver"]),
    "a driver that gives no version": (dict(driver=None, count_error=35), "old-driver",
                                       ["CuPy finds no NVIDIA driver for CUDA 12.9", "install or update the driver"]),
    "two CuPy packages": (dict(packages=("cupy-cuda12x", "cupy-cuda13x")), "two-cupys",
                          ["2 CuPy packages are installed at once", "pip uninstall -y cupy-cuda12x cupy-cuda13x",
                           '"minibert[cuda12]"', '"minibert[cuda13]"']),
    "no NVRTC": (dict(missing="nvrtc"), "no-cuda-libraries",
                 ['CUDA\'s libraries are not (Failure finding "libnvrtc.so"', 'pip install "minibert[cuda12]"',
                  "[ctk]"]),
    "no cuBLAS, CUDA 13": (dict(packages=("cupy-cuda13x",), driver=13000, runtime=13000, missing="cublas"),
                           "no-cuda-libraries", ["libcublas.so", 'pip install "minibert[cuda13]"']),
    "a broken CuPy": (dict(import_error=IMPORT_BANNER.format(cause="cupy/_core/core.so: undefined symbol: foo")),
                      "broken-cupy", ["cupy-cuda12x is installed but does not import (ImportError: cupy/_core",
                                      'pip uninstall -y cupy-cuda12x, then pip install "minibert[cuda12]"']),
    "another CUDA error": (dict(count_error=999), "cuda-error",
                           ["CuPy cannot reach the GPU (cudaErrorUnknown: unknown error)", "nvidia-smi"]),
}


@pytest.fixture
def fake_cupy(tmp_path, monkeypatch):
    """Puts a stand-in CuPy first on sys.path; afterwards the modules of any CuPy are as they were."""
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "cupy"}
    for name in saved:
        del sys.modules[name]
    monkeypatch.setattr(gpu_setup, "_ready", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(**settings):
        folder = write_fake_cupy(tmp_path / "site", **settings)
        monkeypatch.syspath_prepend(str(folder))
        return folder
    yield install
    for name in [k for k in sys.modules if k.split(".")[0] == "cupy"]:
        del sys.modules[name]
    sys.modules.update(saved)


def tiny():
    return mb.BertConfig.from_preset("tiny", vocab_size=10)


def assert_one_clear_error(exc: GPUSetupError, case, says):
    text = str(exc)
    assert exc.case == case, text
    assert "\n" not in text and text.startswith("device='cuda': "), text
    for words in says:
        assert words in text, text
    shown = "".join(traceback.format_exception(exc))      # what Python prints: no CUDA error behind it
    assert "During handling" not in shown and "direct cause" not in shown, shown


@pytest.mark.parametrize("name", list(CASES))
def test_the_library_names_the_case_and_the_fix(fake_cupy, name):
    settings, case, says = CASES[name]
    fake_cupy(**settings)
    with pytest.raises(GPUSetupError) as caught:
        mb.BertForPreTraining(tiny(), device="cuda")
    assert isinstance(caught.value, RuntimeError)
    assert_one_clear_error(caught.value, case, says)
    assert gpu_status() == f"no GPU for minibert: {caught.value.reason}"


def test_a_hidden_gpu_names_cuda_visible_devices(fake_cupy, monkeypatch):
    fake_cupy(count_error=100)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(GPUSetupError) as caught:
        get_xp("cuda")
    assert_one_clear_error(caught.value, "no-gpu", ["CUDA_VISIBLE_DEVICES='' hides them", "unset it"])


def test_a_working_gpu_is_used_and_named(fake_cupy):
    fake_cupy()
    xp = get_xp("cuda")
    assert xp.__name__ == "cupy" and xp.__version__ == "14.2.0"
    assert get_xp("cuda") is xp         # checked once
    assert gpu_status() == ("GPU: Stand-in GPU, 16 GiB; NVIDIA driver for CUDA 12.4, CuPy 14.2.0 for CUDA 12.9")


def cupy_installed() -> bool:
    return importlib.util.find_spec("cupy") is not None


@pytest.mark.skipif(cupy_installed(), reason="CuPy is installed here")
def test_without_cupy_the_library_says_which_extra_to_install():
    with pytest.raises(GPUSetupError) as caught:
        mb.BertForPreTraining(tiny(), device="cuda")
    assert_one_clear_error(caught.value, "no-cupy", ['CuPy is not installed: pip install "minibert[gpu]"',
                                                     '"minibert[cuda13]" for a CUDA 13 driver'])


# ---- the command line: a new process, with the stand-in first on PYTHONPATH ----

def run_minibert(args, cwd, fake=None):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (fake, ROOT) if p)
    return subprocess.run([sys.executable, "-m", "minibert", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def assert_one_line(done, command, says):
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"minibert {command}: error: device='cuda': "), lines[0]
    for words in says:
        assert words in lines[0], lines[0]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text("The first sentence.\nThe second one.\n\nAnother document.\nIt ends here.\n")
    return path


@pytest.mark.parametrize("name", ["no driver", "no GPU", "CuPy for CUDA 13 on a CUDA 12 driver",
                                  "two CuPy packages", "no NVRTC", "a broken CuPy"])
def test_pretrain_on_cuda_fails_in_one_line(tmp_path, text_file, name):
    settings, _, says = CASES[name]
    fake = write_fake_cupy(tmp_path / "site", **settings)
    done = run_minibert(["pretrain", "--corpus", str(text_file), "--device", "cuda", "--out", "run"],
                        tmp_path, fake)
    assert_one_line(done, "pretrain", says)
    assert not (tmp_path / "run").exists()          # nothing was done


def test_the_demo_on_cuda_fails_in_one_line_and_keeps_the_earlier_demo(tmp_path):
    earlier = tmp_path / "demo"
    earlier.mkdir()
    (earlier / ".minibert-demo").write_text("an earlier demo\n")
    (earlier / "metrics.jsonl").write_text("{}\n")
    settings, _, says = CASES["CuPy for CUDA 13 on a CUDA 12 driver"]
    fake = write_fake_cupy(tmp_path / "site", **settings)
    done = run_minibert(["demo", "--device", "cuda", "--out", "demo"], tmp_path, fake)
    assert_one_line(done, "demo", says)
    assert (earlier / "metrics.jsonl").read_text() == "{}\n"


@pytest.mark.skipif(cupy_installed(), reason="CuPy is installed here")
def test_without_cupy_the_command_line_says_which_extra_to_install(tmp_path, text_file):
    for args, command in ((["pretrain", "--corpus", str(text_file), "--out", "run"], "pretrain"),
                          (["demo", "--out", "demo"], "demo")):
        done = run_minibert([*args, "--device", "cuda"], tmp_path)
        assert_one_line(done, command, ['CuPy is not installed: pip install "minibert[gpu]"'])


def test_the_demo_passes_its_device_to_the_run(monkeypatch, capsys, tmp_path):
    import minibert.demo as demo
    seen = []

    def stop(args):
        seen.append(args.device)
        raise ValueError("stopped before the run")
    monkeypatch.setattr(demo, "check_args", stop)
    for device in ("cpu", "cuda"):
        assert main(["demo", "--device", device, "--out", str(tmp_path / "demo")]) == 2
    assert main(["demo", "--out", str(tmp_path / "demo")]) == 2
    assert seen == ["cpu", "cuda", "cpu"]
    assert capsys.readouterr().err.count("stopped before the run") == 3


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_demo_on_the_gpu_installs_the_cuda_extra(tmp_path):
    def planned(*variables):
        done = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}", *variables], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True)
        return done.stdout
    cpu = planned()
    assert "minibert demo --device cpu" in cpu and "[cuda" not in cpu
    gpu = planned("DEVICE=cuda")
    assert "install --quiet -e \".[cuda12]\"" in gpu and "minibert demo --device cuda" in gpu
    assert "install --quiet -e \".[cuda13]\"" in planned("DEVICE=cuda", "CUDA_EXTRA=cuda13")

