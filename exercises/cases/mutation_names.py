"""The slips of names in a right answer (mutation_sites.py): one value used where another belongs.

``Names(fdef)`` follows a function statement by statement and yields, for
each one, the slips of its names: a name used instead of another (in a
backward pass its inputs, what it unpacks from the cache and the values it
computes, those computed later written out: "g (dy * gamma) used instead of
dy"; elsewhere its settings: "beta2 used instead of beta1"), once or
throughout the line; two names swapped in a line or in an unpacking; in a
forward pass the cache holding another local.
"""
from __future__ import annotations

import ast
import copy


def code(node, width: int = 70) -> str:
    text = node if isinstance(node, str) else ast.unparse(node)
    return text if len(text) <= width else text[:width - 3] + "..."


def statements(body):
    """The statements of ``body`` and of the blocks they hold, in order."""
    for stmt in body:
        yield stmt
        for field in ("body", "orelse"):
            if isinstance(getattr(stmt, field, None), list):
                yield from statements(getattr(stmt, field))


class Names:
    def __init__(self, fdef: ast.FunctionDef, outputs: dict):
        self.fdef, self.outputs = fdef, outputs
        self.backward = "backward" in fdef.name
        self.args = [a.arg for a in fdef.args.args + fdef.args.kwonlyargs]
        self.unpacked, self.all = _bound(fdef)
        # a backward pass's inputs and cache entries, then each value once computed; elsewhere the settings
        self.settings = _settings(fdef)
        self.bound = [n for n in self.args + self.unpacked if n != "cache"] if self.backward else \
            self.settings + (_inputs(fdef) if not fdef.name.endswith("_forward") else [])
        self.later = _definitions(fdef) if self.backward else {}

    def pool(self, stmt) -> dict:
        """{name: what it is written as} that may be used for another in ``stmt``, the statement reached."""
        out = {n: None for n in self.bound}
        for name, value in self.later.items():
            uses = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if name not in out and name not in _stored(stmt) and uses <= set(self.bound) | {"np"}:
                out[name] = value
        return out

    def alike(self, a, b) -> bool:
        """May b be used for a?  In a backward pass any two values; elsewhere a setting for a setting, and
        (but in a forward pass) an input for an input."""
        return a != b and (self.backward or (a in self.settings) == (b in self.settings))

    def bind(self, stmt) -> None:
        if self.backward:
            self.bound += [n for n in _stored(stmt) if n not in self.bound and n != "cache"]

    def slips(self, stmt, where, nodes):
        """(node, make, words) of the names of ``stmt`` (its own expression ``nodes``)."""
        pool = self.pool(stmt)
        loads = [n for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in pool]
        for node in loads:
            for other, value in pool.items():
                if self.alike(node.id, other):
                    yield (node, lambda n, o=other, v=value: _written(o, v),
                           f"{where}: {_named(other, value)} used instead of {node.id}"
                           f"{_as_if(stmt, _Put(node, _written(other, value)))}")
        for node in nodes:                      # tanh applied again to what is already tanh(z)
            f = self.outputs.get(node.id) if isinstance(node, ast.Name) and self.backward else None
            if f is not None and isinstance(node.ctx, ast.Load):
                yield (node, lambda n, f=f: ast.Call(copy.deepcopy(f), [n], []),
                       f"{where}: {code(f)}({node.id}) where {node.id} belongs: {node.id} already holds {code(f)} of "
                       f"its input, so {code(f)} is applied twice")
        value = getattr(stmt, "value", None)
        twice = [a for a in dict.fromkeys(n.id for n in loads) if sum(n.id == a for n in loads) > 1]
        for a in twice if value is not None else ():   # the wrong setting (or value) all through the line
            for other, v in pool.items():
                if self.alike(a, other):
                    yield (value, lambda n, a=a, o=other, v=v: _Rename(a, o, v).visit(n),
                           f"{where}: {_named(other, v)} used instead of {a} all through the line"
                           f"{_as_if(stmt, _Rename(a, other, v))}")
        yield from _swaps(stmt, where, set(self.args) | set(self.all))
        yield from _unpacking(stmt)
        yield from _enumerated(stmt, where)

    def cache_slips(self):
        """In a forward pass, each name put into the cache replaced by another of the function's."""
        local = self.args + self.all
        for stmt in statements(self.fdef.body):
            holder = None
            if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple) and len(stmt.value.elts) == 2:
                holder = stmt.value.elts[1]
            elif isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "cache" for t in stmt.targets):
                holder = stmt.value
            if holder is None:
                continue
            for elt in holder.elts if isinstance(holder, ast.Tuple) else [holder]:
                if isinstance(elt, ast.Name):
                    for other in local:
                        if other != elt.id and other != "cache":
                            yield (elt, lambda n, o=other: ast.Name(o, ast.Load()),
                                   f"the cache holds {other} instead of {elt.id}, so the backward pass uses {other} "
                                   f"instead of {elt.id}")


ELEMENTWISE = {"tanh", "exp", "sqrt", "log", "erf", "sigmoid"}


def outputs(defs) -> dict:
    """{name: the function (an ast node)} of each ``name = np.tanh(...)`` in a forward pass of ``defs``."""
    out = {}
    for fdef in defs:
        if not fdef.name.endswith("_forward"):
            continue
        for stmt in statements(fdef.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, ast.Call) and getattr(stmt.value.func, "attr", "") in ELEMENTWISE:
                out[stmt.targets[0].id] = stmt.value.func
    return out


def _written(name, value):
    return ast.Name(name, ast.Load()) if value is None else copy.deepcopy(value)


def _named(name, value) -> str:
    return name if value is None else f"{name} ({code(value, 40)})"


def _bound(fdef):
    unpacked, names = [], []
    for node in ast.walk(fdef):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Tuple):
                    unpacked += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
    return list(dict.fromkeys(unpacked)), list(dict.fromkeys(names))


def _settings(fdef) -> list:
    """The keyword-only arguments and those with a number for a default: a function's settings."""
    a = fdef.args
    with_default = zip(a.args[len(a.args) - len(a.defaults):], a.defaults)
    numbers = [arg.arg for arg, d in [*with_default, *zip(a.kwonlyargs, a.kw_defaults)]
               if d is None or (isinstance(d, ast.Constant) and type(d.value) in (int, float))]
    return list(dict.fromkeys(numbers))


def _inputs(fdef) -> list:
    """The positional arguments without a default: what a function computes from (one may be used for another)."""
    a = fdef.args
    return [arg.arg for arg in a.args[:len(a.args) - len(a.defaults)]]


def _definitions(fdef) -> dict:
    """{name: its value} of each name a plain assignment binds once, at its first binding."""
    out = {}
    for stmt in statements(fdef.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out.setdefault(stmt.targets[0].id, stmt.value)
    return out


def _stored(stmt) -> list:
    """The plain names an assignment statement binds (its targets, and names unpacked in them)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AugAssign) else []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _swaps(stmt, where, local):
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Return)) or stmt.value is None:
        return
    names = list(dict.fromkeys(n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)
                               and n.id in local and isinstance(n.ctx, ast.Load)))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if _commuting(stmt.value, a, b):
                continue
            yield (stmt.value, lambda n, a=a, b=b: _Swap(a, b).visit(n),
                   f"{where}: {a} and {b} swapped in {code(stmt.value)}{_as_if(stmt, _Swap(a, b))}")


def _unpacking(stmt):
    if not (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Tuple)):
        return
    names = [e.id for e in stmt.targets[0].elts if isinstance(e, ast.Name)]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            yield (stmt, lambda n, a=a, b=b: ast.Assign([_Swap(a, b, ast.Store).visit(copy.deepcopy(n.targets[0]))],
                                                       n.value),
                   f"{a} and {b} swapped in the unpacking {code(stmt.targets[0], 40)} = ...")


def _enumerated(stmt, where):
    """In ``[... for i, t in enumerate(xs) if ...]``, one use of the index i where the item t belongs, or
    the reverse: the position tested (or kept) instead of what is at it."""
    value = getattr(stmt, "value", None)
    for comp in (c for c in ast.walk(value) if isinstance(c, ast.comprehension)) if value is not None else ():
        target, it = comp.target, comp.iter
        if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name)
                for e in target.elts) and isinstance(it, ast.Call) and getattr(it.func, "id", "") == "enumerate"):
            continue
        index, item = (e.id for e in target.elts)
        seq = code(it.args[0], 30)
        words = {index: f"the position {index} where the value at it, {seq}[{index}] ({item}), belongs",
                 item: f"the value {item} ({seq}[{index}]) where its position {index} belongs"}
        parent = next(n for n in ast.walk(value) if isinstance(n, (ast.ListComp, ast.SetComp, ast.GeneratorExp,
                                                                     ast.DictComp)) and comp in n.generators)
        for part in [getattr(parent, "elt", None), *comp.ifs]:
            for node in (n for n in ast.walk(part) if isinstance(n, ast.Name)) if part is not None else ():
                for a, b in ((index, item), (item, index)):
                    if node.id == b and isinstance(node.ctx, ast.Load):
                        yield (node, lambda n, a=a: ast.Name(a, ast.Load()), f"{where}: {words[a]} in {code(part)}")


def _commuting(expr, a, b) -> bool:
    """a and b each once in ``expr``, as the two sides of one + or *: swapping them changes nothing."""
    names = [n.id for n in ast.walk(expr) if isinstance(n, ast.Name)]
    if names.count(a) != 1 or names.count(b) != 1:
        return False
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Mult))
               and {getattr(n.left, "id", None), getattr(n.right, "id", None)} == {a, b} for n in ast.walk(expr))


def _as_if(stmt, change) -> str:
    """The line ``stmt`` as the slip writes it (``change``: a transformer of its value), as the end of a hint."""
    if getattr(stmt, "value", None) is None:
        return ""
    value = change.visit(copy.deepcopy(stmt.value)) if not isinstance(change, _Put) else change.on(stmt.value)
    if value is None:                      # the node changed is not in the line's value
        return ""
    if isinstance(stmt, ast.Assign):
        line = " = ".join(ast.unparse(t) for t in stmt.targets) + " = " + ast.unparse(value)
    elif isinstance(stmt, ast.AugAssign):
        line = ast.unparse(ast.AugAssign(stmt.target, stmt.op, value))
    elif isinstance(stmt, ast.Return):
        line = "return " + ast.unparse(value)
    else:
        return ""
    return f": as if the line were {code(line, 90)}"


class _Put(ast.NodeTransformer):
    """``on(expr)``: a copy of ``expr`` with one of its nodes, ``node``, replaced by ``new``."""

    def __init__(self, node, new):
        self.node, self.new, self.target = node, new, None

    def on(self, expr):
        place = next((i for i, n in enumerate(ast.walk(expr)) if n is self.node), None)
        if place is None:
            return None
        copied = copy.deepcopy(expr)
        self.target = list(ast.walk(copied))[place]        # a copy walks in the same order
        return self.visit(copied)

    def visit(self, node):
        return copy.deepcopy(self.new) if node is self.target else super().visit(node)


class _Swap(ast.NodeTransformer):
    def __init__(self, a, b, ctx=ast.Load):
        self.a, self.b, self.ctx = a, b, ctx

    def visit_Name(self, node):
        if node.id in (self.a, self.b) and isinstance(node.ctx, self.ctx):
            return ast.Name(self.b if node.id == self.a else self.a, self.ctx())
        return node


class _Rename(ast.NodeTransformer):
    """Every load of ``a`` becomes ``b`` (or b's value written out)."""

    def __init__(self, a, b, value):
        self.a, self.b, self.value = a, b, value

    def visit_Name(self, node):
        if node.id == self.a and isinstance(node.ctx, ast.Load):
            return _written(self.b, self.value)
        return node
