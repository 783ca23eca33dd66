"""Single slips of a right answer, made mechanically: the mutants of ``exercises/solutions/NAME.py``.

A mutant is the solution with ONE place changed the way students change it:
a term of a sum left out, doubled or with its sign turned, a factor or a
division left out, a product's operands swapped or one of them transposed, a
``.T`` left out, a sum or mean over another axis or without ``keepdims``,
``sum`` for ``mean`` (``max`` for ``min``, ``any`` for ``all``), a ``.copy()``
left out (the caller's array changed in place), one name used where another
belongs (in a backward pass: its inputs, what it unpacks from the cache and
the values it computes; in a forward pass: what it puts in the cache;
elsewhere: its settings), two names swapped in one line or in an unpacking,
a comparison made strict or not
strict or turned round, ``if x`` for ``if x is not None``, an index or a
range one off, a position used where the value at it belongs, a constant
from the other convention, the branches of an ``if`` swapped, a line that
adds, scatters or pops left out.  Each comes with the words a hint says.

``mutants(exercise, functions)`` lists them; the table (``Table.mutate``)
turns each into a case whose functions are the solution's but one.  Every
``while`` of a mutant counts its rounds and gives up after ``ROUNDS``, so a
slip that would loop for ever raises instead.
"""
from __future__ import annotations

import ast
import copy
import importlib
from dataclasses import dataclass, field
from pathlib import Path

from .mutation_names import outputs
from .mutation_sites import sites
from .table import Case

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"
ROUNDS = 10_000


@dataclass(frozen=True)
class Mutant:
    exercise: str
    function: str            # the function whose code is changed
    words: str               # what is wrong, as a hint says it
    touches: tuple           # the exercise's functions that run the changed code
    tree: ast.Module = field(repr=False, compare=False)   # the solution
    index: int = 0              # the node changed: its place in ast.walk(the function's definition)
    make: object = field(default=None, repr=False, compare=False)   # node -> the slipped node

    @property
    def name(self) -> str:
        return f"mutant {self.function}:{self.index}: {self.words}"

    def functions(self) -> dict:
        """{name: function} of the mutated module for the functions it touches (built once)."""
        key = (self.exercise, self.function, self.index, self.words)
        if key not in _BUILT:
            # only the changed function is copied; the module's other statements are shared, unchanged
            body = [copy.deepcopy(n) if getattr(n, "name", None) == self.function else n for n in self.tree.body]
            fdef = next(n for n in body if getattr(n, "name", None) == self.function)
            target = list(ast.walk(fdef))[self.index]      # a copy walks in the same order
            if not _replace(fdef, target, self.make(target)):
                raise ValueError(f"{self.name}: nothing to change")
            tree = ast.fix_missing_locations(ast.Module([*body[:body.index(fdef)], _Guard().visit(fdef),
                                                         *body[body.index(fdef) + 1:]], []))
            ns = {"__name__": f"exercises.solutions.{self.exercise}"}
            exec(compile(tree, f"<{self.exercise}, {self.words}>", "exec"), ns)
            _BUILT[key] = {f: ns[f] for f in self.touches}
        return _BUILT[key]


_BUILT: dict = {}


def mutants(exercise: str, functions) -> list[Mutant]:
    """Every single mutant of the exercise's solution that changes one of ``functions``; [] without a solution."""
    path = SOLUTIONS / f"{exercise}.py"
    if not path.is_file():
        return []
    tree = ast.parse(path.read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    users = _users(defs, functions)
    kept = outputs(defs.values())
    out, seen = [], set()
    for fname, fdef in defs.items():
        if not users.get(fname):
            continue
        # a node's place in the walk, its first (an operator such as ast.Add is one object, shared by every
        # + of every tree, so it cannot carry a number of its own; no slip changes one)
        place = {}
        for i, node in enumerate(ast.walk(fdef)):
            place.setdefault(id(node), i)
        for node, make, words in sites(fdef, kept):
            if (fname, place[id(node)], words) not in seen:
                seen.add((fname, place[id(node)], words))
                out.append(Mutant(exercise, fname, words, tuple(users[fname]), tree, place[id(node)], make))
    return out


def _users(defs: dict, functions) -> dict:
    """{function defined in the solution: the exercise's functions that call it, directly or not}."""
    calls = {name: {n.id for n in ast.walk(d) if isinstance(n, ast.Name) and n.id in defs} for name, d in defs.items()}
    out = {}
    for f in functions:
        reach, todo = set(), [f]
        while todo:
            g = todo.pop()
            if g in reach or g not in defs:
                continue
            reach.add(g)
            todo.extend(calls[g])
        for g in reach:
            out.setdefault(g, []).append(f)
    return out


def _replace(tree, target, new) -> bool:
    """Put ``new`` (a node, or [] to delete a statement) in ``target``'s place."""
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is target:
                if isinstance(new, list):
                    return False
                setattr(parent, name, new)
                return True
            if isinstance(value, list) and any(v is target for v in value):
                i = next(i for i, v in enumerate(value) if v is target)
                rest = value[:i] + ([] if new == [] else [new]) + value[i + 1:]
                if not rest:
                    rest = [ast.Pass()]
                setattr(parent, name, rest)
                return True
    return False


class _Guard(ast.NodeTransformer):
    """Every ``while`` counts its rounds and raises after ``ROUNDS``: a mutant that would loop for ever fails."""
    count = 0

    def visit_While(self, node):
        self.generic_visit(node)
        _Guard.count += 1
        n = f"_rounds_{_Guard.count}"
        check = ast.parse(f"{n} += 1\nif {n} > {ROUNDS}:\n    raise RuntimeError('this slip loops: "
                          f"more than {ROUNDS} rounds of a while loop')").body
        node.body = check + node.body
        return [ast.Assign([ast.Name(n, ast.Store())], ast.Constant(0)), node]


def mutant_cases(table) -> list:
    """The table's mutants as cases: the solution's functions, one of them slipped."""
    found = mutants(table.exercise, table.functions)
    if not found:
        return []
    solution = importlib.import_module(f"exercises.solutions.{table.exercise}")
    right = {f: getattr(solution, f) for f in table.functions}
    return [Case(table.exercise, m.name, f"{m.function}, {m.words}", _Slipped(m), right, mutant=True)
            for m in found]


class _Slipped(dict):
    """A mutant's {function name: slipped function}, its functions built at the first look at one."""

    def __init__(self, mutant: Mutant):
        super().__init__({f: None for f in mutant.touches})
        self.mutant = mutant

    def __getitem__(self, name):
        return self.mutant.functions()[name]

    def items(self):
        return self.mutant.functions().items()

    def values(self):
        return self.mutant.functions().values()

    def __iter__(self):
        return iter(self.mutant.touches)

    def keys(self):
        return self.mutant.touches
