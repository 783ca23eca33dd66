"""The places of a right answer where one slip can go, and what a hint says of each (mutation.py).

sites(function) yields (node, make, words) for one function of a
solution: make(node) gives the slipped node (a statement's: [] to leave
it out), and words say what is wrong in the student's terms, with the
solution's names: "in dx: the term g.mean(axis=-1, keepdims=True) is
missing".
"""
from __future__ import annotations

import ast
import copy

from .mutation_names import Names, code, statements

AXES = (-1, -2, 0, 1, None)
REDUCE = {"sum", "mean", "max", "min", "var", "std", "argmax"}
SWAP_CALL = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "maximum": "minimum", "minimum": "maximum",
             "all": "any", "any": "all"}
BUILTIN_SWAP = {"all": "any", "any": "all", "max": "min", "min": "max"}
FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
        ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
TURN = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
# a constant where another convention's belongs: {the right value: (what it is, ((the other, whose it is), ...))}
CONVENTIONS = {1e-12: ("BERT's LayerNorm epsilon", ((1e-5, "PyTorch's nn.LayerNorm default"),)),
               -100: ("the ignore_index of PyTorch's cross-entropy", ((-1, "the old -1 convention"),)),
               1e-6: ("BERT's AdamW epsilon", ((1e-8, "PyTorch's Adam default"),))}
_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
        ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is",
        ast.IsNot: "is not"}


def sites(fdef: ast.FunctionDef, outputs=None):
    """Every (node, make, words) of the function fdef; ``outputs``: {name: the NumPy function whose result
    a forward pass of the module keeps in it} (``pooled = np.tanh(...)``)."""
    names = Names(fdef, outputs or {})
    for stmt in statements(fdef.body):
        where = _where(stmt)
        yield from _statement_sites(stmt, where, names.backward)
        nodes = list(_own_nodes(stmt))
        for node in nodes:
            for make, what in _expr_sites(node):
                yield node, make, f"{where}: {what}"
        yield from names.slips(stmt, where, nodes)
        names.bind(stmt)
    if fdef.name.endswith("_forward"):
        yield from names.cache_slips()
    if names.backward:
        yield from _steps_turned(fdef.body)


def _steps_turned(body):
    """``a = g_backward(e, ...)`` then ``b = F(a)``: g's step taken after F's, ``a = e; b = g_backward(F(a), ...)``."""
    for first, then in zip(body, body[1:]):
        if not (_assigns_name(first) and _assigns_name(then) and isinstance(first.value, ast.Call)
                and first.value.args and getattr(first.value.func, "id", "").endswith("_backward")):
            continue
        a, b, call = first.targets[0].id, then.targets[0].id, first.value
        if not any(isinstance(n, ast.Name) and n.id == a for n in ast.walk(then.value)):
            continue

        def make(n, a=a, call=call):
            moved = ast.Call(copy.deepcopy(call.func), [n.value, *copy.deepcopy(call.args[1:])],
                             copy.deepcopy(call.keywords))
            return ast.If(ast.Constant(True), [ast.Assign([ast.Name(a, ast.Store())], copy.deepcopy(call.args[0])),
                                               ast.Assign(n.targets, moved)], [])
        yield (then, make, f"{call.func.id}() applied to {b} after {code(then.value, 40)}, where it belongs to {a} "
                           f"before it: the two steps in the wrong order")


def _assigns_name(stmt) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)


def _where(stmt) -> str:
    if isinstance(stmt, ast.Assign):
        return "in " + ", ".join(ast.unparse(t) for t in stmt.targets)
    if isinstance(stmt, ast.AugAssign):
        return f"in {ast.unparse(stmt.target)} {_OPS.get(type(stmt.op), '?')}="
    if isinstance(stmt, ast.Return):
        return "in what it returns"
    if isinstance(stmt, (ast.If, ast.While)):
        return f"in the test {code(stmt.test)}"
    if isinstance(stmt, ast.For):
        return f"in for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}"
    return f"in {code(stmt)}"


def _own_nodes(stmt):
    """The expression nodes of a statement, not those of the statements it holds, nor an axis= (the axis
    slips name those) nor what only its .shape, .ndim, .size or .dtype is read of."""
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "targets", "target") and not isinstance(stmt, ast.For):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, ast.expr):
                yield from _walk(v)


def _walk(node):
    yield node
    if isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim", "size", "dtype"):
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.keyword) and child.arg == "axis":
            continue
        yield from _walk(child)


def _statement_sites(stmt, where, backward):
    text = code(stmt.test) if isinstance(stmt, ast.If) else None
    if isinstance(stmt, ast.If) and stmt.orelse:
        yield stmt, lambda n: ast.If(n.test, n.orelse, n.body), f"the two branches of 'if {text}' swapped"
    if isinstance(stmt, ast.If) and not stmt.orelse:
        yield stmt, lambda n: [], f"the 'if {text}:' block left out"
    if isinstance(stmt, ast.AugAssign) or (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript)):
        yield stmt, lambda n: [], f"the line {code(stmt)} left out"
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Subscript) \
            and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) in (int, float):
        target, whole = code(stmt.targets[0]), code(stmt.targets[0].value)
        yield (stmt, lambda n: _all_but(n),
               f"the selection inverted: every entry of {whole} but {target} set to {stmt.value.value!r}, "
               f"where only {target} is")
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        yield stmt, lambda n: [], f"the call {code(stmt)} left out"
    if backward and isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
        yield stmt, lambda n: ast.Assign(n.targets, _neg(n.value)), f"{where}: the wrong sign (negated)"
    if backward and isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
        for i, elt in enumerate(stmt.value.elts):
            yield elt, lambda n: _neg(n), f"the result {code(elt)} with the wrong sign (negated)"


def _all_but(stmt):
    """``a[i] = c`` turned into: every entry of a but a[i] set to c."""
    target, whole, value = ast.unparse(stmt.targets[0]), ast.unparse(stmt.targets[0].value), ast.unparse(stmt.value)
    body = ast.parse(f"_kept = {target}.copy()\n{whole}[...] = {value}\n{target} = _kept").body
    return ast.If(ast.Constant(True), body, [])


def _neg(node):
    return ast.UnaryOp(ast.USub(), node)


def _expr_sites(node):
    """(make, what) for the slips of one expression node."""
    if isinstance(node, ast.BinOp):
        yield from _binop(node)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        what = "the minus sign" if isinstance(node.op, ast.USub) else "the not"
        yield lambda n: n.operand, f"{what} of {code(node)} left out"
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            yield from _conventions(-node.operand.value)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        yield from _compare(node)
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield (lambda n: ast.BoolOp(other, n.values),
               f"{'or' if isinstance(other, ast.Or) else 'and'} where {'and' if isinstance(other, ast.Or) else 'or'}"
               f" belongs in {code(node)}")
    elif isinstance(node, ast.Call):
        yield from _call(node)
    elif isinstance(node, ast.Attribute) and node.attr == "T" and isinstance(node.ctx, ast.Load):
        yield lambda n: n.value, f"the transpose (.T) of {code(node)} left out"
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        yield from _subscript(node)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield from _constant(node)


def _binop(node):
    left, right, op = code(node.left), code(node.right), type(node.op)
    if op in (ast.Add, ast.Sub):
        sign = "+" if op is ast.Add else "-"
        yield lambda n: n.left, f"the term {sign} {right} is missing from {code(node)}"
        yield (lambda n: n.right if op is ast.Add else _neg(n.right)), f"the term {left} is missing from {code(node)}"
        other = ast.Sub() if op is ast.Add else ast.Add()
        yield (lambda n: ast.BinOp(n.left, other, n.right),
               f"{right} {'subtracted' if op is ast.Add else 'added'} where it is {'added' if op is ast.Add else 'subtracted'}"
               f" in {code(node)}: the term has the wrong sign")
        yield (lambda n: ast.BinOp(n.left, n.op, ast.BinOp(ast.Constant(2), ast.Mult(), n.right)),
               f"the term {right} counted twice")
    elif op is ast.Mult:
        yield lambda n: n.left, f"the factor {right} left out of {code(node)}{_times(node.right)}"
        yield lambda n: n.right, f"the factor {left} left out of {code(node)}{_times(node.left)}"
    elif op is ast.Div:
        yield lambda n: n.left, f"the division by {right} left out"
        yield lambda n: ast.BinOp(n.left, ast.Mult(), n.right), f"multiplied by {right} where it divides"
    elif op is ast.MatMult:
        yield lambda n: ast.BinOp(n.right, ast.MatMult(), n.left), f"the operands of {code(node)} in the other order"
        for side in ("left", "right"):
            operand = getattr(node, side)
            if not _transposed(operand):      # a transpose taken back is the '.T left out' slip
                yield (lambda n, side=side: _with(n, side, _swapaxes(getattr(n, side))),
                       f"{code(operand, 30)} transposed where {code(operand, 30)} belongs in {code(node)}")
    elif op is ast.Mod:
        yield lambda n: n.left, f"{code(node)} without the % {right[1:-1]}: the index does not wrap around"


def _transposed(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "T") or \
        (isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("swapaxes", "transpose"))


def _swapaxes(node):
    """``node.swapaxes(-1, -2)``: the transpose of a matrix or of each matrix of a stack."""
    return ast.Call(ast.Attribute(node, "swapaxes", ast.Load()), [ast.Constant(-1), ast.Constant(-2)], [])


def _with(node, side, value):
    return ast.BinOp(value if side == "left" else node.left, node.op, value if side == "right" else node.right)


def _times(factor) -> str:
    """What leaving out a constant factor does to the result, in words."""
    if not (isinstance(factor, ast.Constant) and type(factor.value) in (int, float)) or factor.value in (0, 1):
        return ""
    k = 1 / factor.value
    return ": the result is " + {2: "twice", 0.5: "half"}.get(k, f"{k:g} times") + " the right one"


def _compare(node):
    op, text = type(node.ops[0]), code(node)
    if op in FLIP:
        new = FLIP[op]
        yield (lambda n: ast.Compare(n.left, [new()], n.comparators),
               f"'{_OPS[new]}' where '{_OPS[op]}' belongs in {text}")
    if op in TURN:
        new = TURN[op]
        yield (lambda n: ast.Compare(n.left, [new()], n.comparators),
               f"the comparison turned round: '{_OPS[new]}' where '{_OPS[op]}' belongs in {text}")
    if op is ast.IsNot and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        yield (lambda n: n.left, f"'if {ast.unparse(node.left)}' where '{text}' belongs: a value of 0 (or an empty one) "
                                 "is taken for None")


def _call(node):
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    text = code(node)
    if name in SWAP_CALL and isinstance(node.func, ast.Attribute):
        new = SWAP_CALL[name]
        yield (lambda n: ast.Call(ast.Attribute(n.func.value, new, ast.Load()), n.args, n.keywords),
               f"{new}() where {name}() belongs in {text}")
    if name in BUILTIN_SWAP and isinstance(node.func, ast.Name):
        new = BUILTIN_SWAP[name]
        yield lambda n: ast.Call(ast.Name(new, ast.Load()), n.args, n.keywords), f"{new}() where {name}() belongs in {text}"
    if name in REDUCE:
        yield from _axis(node, text)
    if name == "copy" and isinstance(node.func, ast.Attribute) and not node.args:
        yield (lambda n: n.func.value, f"{text} without the copy: the caller's array is changed in place")
    if name == "choice" and node.args and isinstance(node.args[0], ast.Name):   # choice(n) draws from range(n)
        x = node.args[0].id
        yield (lambda n: ast.Call(n.func, [ast.Call(ast.Name("len", ast.Load()), n.args[:1], []), *n.args[1:]],
                                  n.keywords),
               f"the indices 0 .. len({x}) - 1 where the entries of {x} belong in {text}")
    if name in ("range", "integers"):
        for i, arg in enumerate(node.args[:2]):
            for d in (1, -1):
                yield (lambda n, i=i, d=d: ast.Call(n.func, _bump(n.args, i, d), n.keywords),
                       f"{code(arg)} {'+' if d > 0 else '-'} 1 where {code(arg)} belongs in {text}: one off")


def _bump(args, i, d):
    new = list(args)
    new[i] = ast.BinOp(args[i], ast.Add() if d > 0 else ast.Sub(), ast.Constant(1))
    return new


def _axis(node, text):
    kw = next((k for k in node.keywords if k.arg == "axis"), None)
    if kw is not None and isinstance(kw.value, (ast.Constant, ast.UnaryOp)):
        old = ast.literal_eval(kw.value)
        for axis in AXES:
            if axis != old:
                yield (lambda n, a=axis: _with_axis(n, a), f"over axis {axis} where axis {old} belongs in {text}")
    if any(k.arg == "keepdims" for k in node.keywords):
        yield (lambda n: ast.Call(n.func, n.args, [k for k in n.keywords if k.arg != "keepdims"]),
               f"{text} without keepdims=True")


def _with_axis(node, axis):
    keywords = [ast.keyword("axis", ast.Constant(axis)) if k.arg == "axis" else k for k in node.keywords]
    return ast.Call(node.func, node.args, keywords)


def _subscript(node):
    index = node.slice
    if isinstance(index, ast.Name):
        yield lambda n: n.slice, f"the position {index.id} where the value at it, {code(node)}, belongs"
    if isinstance(index, (ast.Name, ast.BinOp)):
        for d, words in ((1, "one more"), (-1, "one less")):
            yield (lambda n, d=d: ast.Subscript(n.value, _bump([n.slice], 0, d)[0], n.ctx),
                   f"the index of {code(node)} {words}: one off")
    if isinstance(index, ast.Tuple) and index.elts and isinstance(index.elts[0], ast.Call) \
            and getattr(index.elts[0].func, "attr", "") == "arange":
        yield (lambda n: ast.Subscript(n.value, ast.Tuple([ast.Slice(), *n.slice.elts[1:]], ast.Load()), n.ctx),
               f"':' where {code(index.elts[0])} belongs in {code(node)}: every row with every row's index, "
               "not each row with its own")


def _conventions(value):
    """Another convention's constant where ``value`` belongs (``-100`` is a minus sign and a constant)."""
    meaning, others = CONVENTIONS.get(value, ("", ()))
    for other, whose in others:
        yield lambda n, o=other: ast.Constant(o), f"{other!r} ({whose}) where {value!r} ({meaning}) belongs"


def _constant(node):
    value = node.value
    yield from _conventions(value)
    if type(value) is float and 0 < value < 1 and value != 0.5:
        yield lambda n: ast.Constant(round(1 - value, 12)), f"{round(1 - value, 12)!r} where {value!r} belongs"
    if type(value) is int and not isinstance(value, bool) and value in (1, 2, 3):
        for d in (1, -1):
            yield lambda n, d=d: ast.Constant(value + d), f"{value + d} where {value} belongs: one off"
