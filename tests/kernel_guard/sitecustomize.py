"""Loaded at start-up by the Jupyter kernels that run the notebooks under ``make test``.

``tests/notebook_kernels.py`` puts this folder on ``PYTHONPATH`` and lists, in
``MINIBERT_KERNEL_BLOCKED``, the top-level modules of every installed package that
``pip install "minibert[notebooks]"`` would not bring (torch, transformers, pytest, ...).
In a kernel, importing one of them fails as if it were not installed, so a notebook
that needs a test-only package fails the suite instead of failing for the student.
The kernel's data folder is ``MINIBERT_KERNEL_DATA``, which holds what notebook 1 would
download. Other processes (the tests' own subprocesses) are left alone.
"""
import os
import sys

_BLOCKED = frozenset(filter(None, os.environ.get("MINIBERT_KERNEL_BLOCKED", "").split(",")))


class _NotInNotebooksExtra:
    """A meta-path finder that refuses the blocked modules (and everything inside them)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {name!r}: the notebooks must run with minibert's notebooks extra "
                f"alone, and {name.partition('.')[0]!r} is not part of it", name=name)
        return None


if _BLOCKED and "ipykernel_launcher" in " ".join(getattr(sys, "orig_argv", [])):
    sys.meta_path.insert(0, _NotInNotebooksExtra())
    # the data folder where a download would have put BERT's vocab.txt (the suite runs offline)
    if os.environ.get("MINIBERT_KERNEL_DATA") and not os.environ.get("MINIBERT_DATA"):
        os.environ["MINIBERT_DATA"] = os.environ["MINIBERT_KERNEL_DATA"]
