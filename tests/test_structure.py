"""The packages' shape: no import cycles among their modules, and no module or function too long to read.

Both are read from the source with ``ast``: nothing is imported, and an import
written inside a function counts as much as one at the top of a module (it
only hides a cycle, it does not remove it).  The same rules hold for
``minibert`` and for ``exercises`` (the checkers, their table of mistakes,
the sandbox).
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minibert"
PACKAGES = (PACKAGE, ROOT / "exercises")

MAX_MODULE_LINES = 350
MAX_FUNCTION_LINES = 60
# modules allowed past MAX_MODULE_LINES, each with its reason: only modules that are mostly
# CUDA C++ source held in Python strings (a kernel is read whole, not cut across files)
LONG_MODULES = {}


def _modules():
    """{dotted name: path} of every module of the packages."""
    found = {}
    for path in sorted(p for package in PACKAGES for p in package.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph():
    """{module: the modules of the package it imports}, function-level imports included."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # `from . import x` imports the module x, `from .m import f` the module m
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                               for a in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules (the first again at the end), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_modules_import_each_other_without_a_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_a_cycle_hidden_in_a_function():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    graph = import_graph()
    assert "minibert.train.loop" in graph["minibert.train"]       # `from .loop import ...`
    assert "minibert.accel.cpu" in graph["minibert.kernels"]      # `from .accel import cpu`, in select_ops
    assert "exercises.checks.common" in graph["exercises.checks.linear"]     # `from .common import ...`
    assert "exercises.cases.linear" in graph["exercises.checks.linear"]      # `from ..cases import linear`
    assert "exercises.checks" in graph["exercises.sandbox"]                  # in check_isolated


def test_no_module_or_function_is_too_long_to_read():
    too_long = []
    for name, path in _modules().items():
        source = path.read_text(encoding="utf-8")
        n_lines = len(source.splitlines())
        if n_lines > MAX_MODULE_LINES and name not in LONG_MODULES:
            too_long.append(f"module {name}: {n_lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}.{node.name} (line {node.lineno}): {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    assert not too_long, "split these by what they do:\n" + "\n".join(too_long)
    assert set(LONG_MODULES) <= set(_modules()), "the allow-list names a module that is gone"


def only_reexports(source: str, package: str):
    """The one module that a module's code does nothing but import names from (a shim kept for an old
    import path), or None.  Its docstring, ``from __future__`` and ``__all__`` do not count."""
    sources = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue                                        # the docstring
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            continue
        if not isinstance(node, ast.ImportFrom):
            return None                                     # code of its own
        sources.add(("." * node.level) + (node.module or ""))
    return next(iter(sources)) if len(sources) == 1 else None


def test_no_module_only_reexports_another():
    # a package's __init__ gathers its modules (ops/, accel/cpu/, accel/cuda/ are each a set of ops),
    # and minibert.data gathers the data pipeline's; a module that is another one's names under a
    # second path (as minibert.layers was of minibert.ops) is a shim: import the module itself
    shims = []
    for name, path in _modules().items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        target = only_reexports(path.read_text(encoding="utf-8"), name)
        if target is not None:
            shims.append(f"{name} only re-exports {target}")
    assert not shims, shims


def test_the_shim_finder_sees_a_shim():
    shim = '"""The ops."""\nfrom __future__ import annotations\nfrom .ops import *  # noqa\nfrom .ops import __all__\n'
    assert only_reexports(shim, "minibert.layers") == ".ops"
    assert only_reexports(shim + "\ndef f():\n    return 1\n", "minibert.layers") is None
    gathered = "from .corpus import Corpus\nfrom .masking import mask_tokens\n__all__ = ['Corpus', 'mask_tokens']\n"
    assert only_reexports(gathered, "minibert.data") is None


def test_both_packages_are_read():
    modules = _modules()
    assert "minibert.ops.linear" in modules and "exercises.checks.linear" in modules
    assert "exercises.cases.table" in modules and "exercises" in modules


def test_the_architecture_page_names_every_module():
    # docs/ARCHITECTURE.md is the map: every module of the package has its row there (the files of
    # ops/ and accel/ are described in those folders' rows)
    page = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("ops", "accel"):
            if f"`{rel.parts[0]}/`" not in page:
                missing.append(f"{rel.parts[0]}/")
            continue
        if rel.name == "__init__.py":
            continue
        if str(rel.as_posix()) not in page:
            missing.append(rel.as_posix())
    assert not missing, f"docs/ARCHITECTURE.md does not name {sorted(set(missing))}"


# The packages are layers (docs/ARCHITECTURE.md): each may import only the layers below it.
# "shared" is the top-level modules every layer uses (checks, constants, paths, backend, ...);
# "commands" the command line and the demo, which may import anything, as the exercises may.
LAYERS = {
    "ops": {"shared"},
    "accel": {"ops", "shared"},
    "data": {"shared"},
    "model": {"ops", "accel", "shared"},
    "train": {"model", "data", "ops", "accel", "shared"},
    "finetune": {"train", "model", "data", "ops", "accel", "shared"},
    "shared": {"ops", "accel"},          # kernels.py chooses between ops and accel
}
COMMANDS = {"minibert", "minibert.__main__", "minibert.cli", "minibert.commands", "minibert.demo"}
# the imports across the layers that are allowed: fill-mask turns text into ids; the ranks of a
# data-parallel job compare minibert's version
CROSSINGS = {("minibert.model.inference", "minibert.data.tokenizer"), ("minibert.train.dist", "minibert")}


def layer_of(module: str) -> str:
    if module in COMMANDS or not module.startswith("minibert."):
        return "commands"
    package = module.split(".")[1]
    return package if (PACKAGE / package).is_dir() and package in LAYERS else "shared"


def layer_violations(graph):
    bad = []
    for module, deps in graph.items():
        layer = layer_of(module)
        if layer == "commands":
            continue
        for dep in deps:
            other = layer_of(dep)
            if other != layer and other not in LAYERS[layer] and (module, dep) not in CROSSINGS:
                bad.append(f"{module} ({layer}) imports {dep} ({other})")
    return sorted(bad)


def test_each_package_imports_only_the_layers_below_it():
    bad = layer_violations(import_graph())
    assert not bad, "imports against the layers of docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def test_the_layer_check_sees_a_wrong_import():
    graph = {"minibert.data.masking": {"minibert.model.bert"}, "minibert.ops.linear": {"minibert.accel.blas"},
             "minibert.train.loop": {"minibert.data.masking"}}
    assert layer_violations(graph) == ["minibert.data.masking (data) imports minibert.model.bert (model)",
                                       "minibert.ops.linear (ops) imports minibert.accel.blas (accel)"]


def test_the_architecture_page_names_every_module_of_the_exercises():
    # its "Exercises" section has a row for each module by its path from the repository's root;
    # the students' files (stubs/) and the instructor's (solutions/) by their folder's row
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert "## Exercises" in page
    section = page.split("## Exercises", 1)[1].split("\n## ", 1)[0]
    missing = []
    for path in sorted((ROOT / "exercises").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] in ("stubs", "solutions"):
            name = f"exercises/{rel.parts[1]}/"
        elif rel.name == "__init__.py" and len(rel.parts) == 2:
            continue
        else:
            name = rel.as_posix()
        if f"`{name}`" not in section:
            missing.append(name)
    assert not missing, f"the Exercises section of docs/ARCHITECTURE.md does not name {sorted(set(missing))}"
