"""The project's set-up: pyproject.toml and environment.yml list the same packages."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _split(req):
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def _pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra in ("test", "notebooks", "dist"):
        reqs += data["optional-dependencies"][extra]
    return dict(_split(r) for r in reqs)


def _environment():
    deps = {}
    text = (ROOT / "environment.yml").read_text().split("\ndependencies:\n", 1)[1]
    for line in text.splitlines():
        m = re.match(r"^\s+-\s+([^#]+?)\s*$", line)
        if not m:
            continue
        item = m.group(1)
        if item in ("pip", "pip:", "-e .") or item.startswith("python="):
            continue
        name, spec = _split(item)
        deps[name] = spec
    return deps


def test_environment_matches_pyproject():
    assert _environment() == _pyproject()


def test_torch_is_pinned():
    # an unpinned torch pulls several GB of CUDA packages
    assert _pyproject()["torch"] == "==2.13.0"


def test_the_test_references_are_pinned():
    # a reference that moves under the suite is no reference: transformers 5.24 changed what
    # BertTokenizerFast(vocab_file=...) loads, for example
    deps = _pyproject()
    for name in ("torch", "transformers", "tokenizers", "nbgrader", "scikit-learn"):
        assert deps[name].startswith("=="), f"{name} is not pinned: {deps[name]!r}"


def test_gpu_extra_is_cupy():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("cupy-cuda12x") for r in data["optional-dependencies"]["gpu"])


def test_the_test_extra_brings_the_dist_extra():
    # make test starts real MPI jobs (tests/test_dist.py)
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(data["dist"]) <= set(data["test"])
    assert {_split(r)[0] for r in data["dist"]} == {"mpi4py", "mpich"}


def test_an_extra_per_cuda_version_names_its_cupy():
    # a CUDA 12 build runs on a CUDA 13 driver, not the reverse: one extra per CUDA major version,
    # each with CuPy's [ctk] (CUDA's libraries from pip, so a machine needs only the NVIDIA driver)
    from minibert.gpu_setup import EXTRAS
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["cuda12"] == ["cupy-cuda12x[ctk]>=14"]
    assert extras["cuda13"] == ["cupy-cuda13x[ctk]>=14"]
    assert extras["gpu"] == extras["cuda12"]          # the first name of the CUDA 12 one
    for major, extra in EXTRAS.items():                # the extras the error messages name
        assert extras[extra] == [f"cupy-cuda{major}x[ctk]>=14"]


def test_environment_yml_names_the_same_cupy_as_the_extras():
    gpu_comment = (ROOT / "environment.yml").read_text().split("\n# GPU:", 1)[1]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("cuda12", "cuda13"):
        assert f"  {extras[extra][0]}  " in gpu_comment and f'"{extra}"' in gpu_comment, (extra, gpu_comment)
