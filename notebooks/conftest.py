"""Run the notebooks (``pytest --nbval``) with only what ``pip install "minibert[notebooks]"`` brings.

The suite's environment also holds the test-only references (torch, transformers, ...).
A notebook that imported one would pass here and fail for a student, so the kernels
that nbval starts cannot import any installed package outside the closure of
minibert's requirements with the ``notebooks`` extra: see
``tests/kernel_guard/sitecustomize.py``.
"""
import os
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

GUARD = Path(__file__).resolve().parents[1] / "tests" / "kernel_guard"
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


os.environ["MINIBERT_KERNEL_BLOCKED"] = ",".join(sorted(blocked_modules()))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GUARD), os.environ.get("PYTHONPATH")]))
