"""Run the notebooks (``pytest --nbval``) with only what ``pip install "minibert[notebooks]"`` brings.

The suite's environment also holds the test-only references (torch, transformers, ...).
A notebook that imported one would pass here and fail for a student, so the kernels
that nbval starts cannot import any installed package outside the closure of
minibert's requirements with the ``notebooks`` extra: ``guard_notebook_kernels()``
(called by ``tests/conftest.py``, which ``make test`` loads before any notebook runs)
sets the environment that ``tests/kernel_guard/sitecustomize.py`` reads in each kernel.
"""
import atexit
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

GUARD = Path(__file__).resolve().parent / "kernel_guard"
ALWAYS = {"pip", "setuptools", "wheel"}          # in every virtual environment


def notebook_distributions(root="minibert", extras=("notebooks",)) -> set[str]:
    """The distributions that installing ``root[extras]`` pulls in, transitively (canonical names)."""
    found: set[str] = set()
    visited: set[tuple[str, tuple[str, ...]]] = set()      # a package is visited again for other extras
    todo = [(root, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        if (key := (canonicalize_name(name), wanted)) in visited:
            continue
        visited.add(key)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue                                      # not installed here: nothing to follow
        found.add(key[0])
        for line in requires:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted or ("",)):
                todo.append((req.name, tuple(sorted(req.extras))))
    return found


def blocked_modules() -> set[str]:
    """Top-level modules that only packages outside the notebooks' closure provide."""
    allowed = notebook_distributions() | ALWAYS
    return {module for module, dists in metadata.packages_distributions().items()
            if not module.startswith("_") and not any(canonicalize_name(d) in allowed for d in dists)}


def kernel_data_dir() -> str:
    """A data folder for the kernels that already holds BERT's vocab.txt, as a student's has
    after notebook 1 ran once online: the suite runs offline, and the test package that ships
    the file is one the kernels may not import."""
    from minibert.data.bert_vocab import FILE, bert_uncased_vocab
    folder = Path(tempfile.mkdtemp(prefix="minibert-kernel-data-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    try:
        source = bert_uncased_vocab(data_dir=folder, download=False)   # the test package's verified copy
    except FileNotFoundError:
        return str(folder)                                             # notebook 1 will download it
    (folder / FILE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, folder / FILE)
    return str(folder)


def guard_notebook_kernels() -> None:
    """Set the environment the kernels inherit: the modules they may not import, the guard's
    folder, and their data folder."""
    os.environ["MINIBERT_KERNEL_BLOCKED"] = ",".join(sorted(blocked_modules()))
    os.environ.setdefault("MINIBERT_KERNEL_DATA", kernel_data_dir())
    if str(GUARD) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GUARD), os.environ.get("PYTHONPATH")]))
