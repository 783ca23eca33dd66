"""Execute a notebook where Jupyter is not installed, as ``jupyter nbconvert --execute`` would.

A GPU machine often has CuPy, PyTorch and matplotlib but no Jupyter.  This runs a notebook's
code cells in order in one namespace, in the notebook's folder (``import _style`` works), and
writes a copy with the outputs a kernel would have kept:

* what a cell prints (``stream``, stdout and stderr);
* the value of a cell's last line when it is an expression (``execute_result``);
* each matplotlib figure the cell leaves open, as a PNG (``display_data``), then closed;
* an exception: its traceback as an ``error`` output, and no later cell runs (exit status 1).

A line that starts with ``%`` or ``!`` (IPython's magics and shell escapes) is skipped, with a
notice in the cell's output.  Usage::

    python benchmarks/run_notebook.py notebooks/07_gpu_with_cupy.ipynb --out runs/07_on_this_gpu.ipynb
"""
from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path


def _figures() -> list[dict]:
    """The open matplotlib figures as display_data outputs (PNG), closed afterwards."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    import matplotlib.pyplot as plt
    outputs = []
    for number in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(number).savefig(buf, format="png", bbox_inches="tight")
        outputs.append({"output_type": "display_data", "metadata": {},
                        "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                                 "text/plain": [f"<Figure {number}>"]}})
    plt.close("all")
    return outputs


def _stream(name: str, text: str) -> list[dict]:
    return [{"output_type": "stream", "name": name, "text": text.splitlines(keepends=True)}] if text else []


def run_cell(source: str, namespace: dict, count: int) -> tuple[list[dict], bool]:
    """Run one cell's source; its outputs, and whether it raised."""
    kept, skipped = [], []
    for line in source.splitlines():
        (skipped if line.lstrip().startswith(("%", "!")) else kept).append(line)
    out, err = io.StringIO(), io.StringIO()
    result, failed = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            tree = ast.parse("\n".join(kept), filename=f"<cell {count}>")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, f"<cell {count}>", "exec"), namespace)
            if last is not None:
                result = eval(compile(ast.Expression(last.value), f"<cell {count}>", "eval"), namespace)
        except BaseException as exc:      # as a kernel: the error is the cell's output (KeyboardInterrupt too)
            failed = exc
    notice = "".join(f"(run_notebook.py: not run: {line.strip()})\n" for line in skipped)
    outputs = _stream("stdout", out.getvalue()) + _stream("stderr", notice + err.getvalue())
    if failed is not None:
        lines = traceback.format_exception(failed)
        outputs.append({"output_type": "error", "ename": type(failed).__name__, "evalue": str(failed),
                        "traceback": [line.rstrip("\n") for line in lines]})
        return outputs, True
    outputs += _figures()
    if result is not None:
        outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                        "data": {"text/plain": repr(result).splitlines(keepends=True)}})
    return outputs, False


def run_notebook(path: Path, out: Path) -> bool:
    """Execute the notebook at ``path`` into ``out``; True when every cell ran."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    os.environ.setdefault("MPLBACKEND", "Agg")
    here = os.getcwd()
    os.chdir(path.parent)
    sys.path.insert(0, str(path.parent.resolve()))
    namespace = {"__name__": "__main__"}
    count, ok = 0, True
    try:
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            if not ok:                      # after an error, as nbconvert: nothing more runs
                cell["outputs"], cell["execution_count"] = [], None
                continue
            count += 1
            cell["outputs"], failed = run_cell("".join(cell["source"]), namespace, count)
            cell["execution_count"] = count
            if failed:
                ok = False
                print(f"{path.name}: code cell {count} raised:\n" + "\n".join(cell["outputs"][-1]["traceback"]),
                      file=sys.stderr)
    finally:
        os.chdir(here)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the executed copy (the notebook itself is untouched)")
    args = ap.parse_args(argv)
    if not args.notebook.is_file():
        ap.error(f"no notebook at {args.notebook}")
    ok = run_notebook(args.notebook.resolve(), args.out.resolve())
    print(f"{args.notebook.name}: {'every cell ran' if ok else 'stopped at an error'}; outputs in {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
