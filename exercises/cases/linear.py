"""The linear layer's usual mistakes: y = x W^T + b, W stored as (out, in)."""
from __future__ import annotations

from .table import Table


def linear_forward(x, W, b):
    return x @ W.T + b, (x, W)


def linear_backward(dy, cache):
    x, W = cache
    dy2, x2 = _rows(dy), _rows(x)
    return dy @ W, dy2.T @ x2, dy2.sum(axis=0)


def _rows(a):
    """(..., n) as (N, n): every leading axis is a row of the product."""
    return a.reshape(-1, a.shape[-1])


def _backward(dx=None, dW=None, db=None):
    """A linear_backward with some of its three results computed by the functions given."""
    def linear_backward(dy, cache):
        right = TABLE.right["linear_backward"](dy, cache)
        x, W = cache
        return tuple(f(dy, x, W) if f else r for f, r in zip((dx, dW, db), right))
    return linear_backward


TABLE = Table("linear", linear_forward=linear_forward, linear_backward=linear_backward)
case = TABLE.case

SUMMED = "dW is the SUM over the rows of dy^T @ x, not the mean: do not divide by the number of rows"
FLATTEN = "with x of shape (B, T, in), flatten x and dy to 2-D before dy^T @ x"

NO_BIAS = case("bias left out", "the bias b is missing from y", linear_forward=lambda x, W, b: (x @ W.T, (x, W)))
case("bias subtracted", "add the bias, do not subtract it", linear_forward=lambda x, W, b: (x @ W.T - b, (x, W)))
case("dx with W transposed",
     "a shape mismatch: dx = dy @ W, since W is stored as (out, in) and dy is (..., out); dy @ W.T does not fit",
     linear_backward=_backward(dx=lambda dy, x, W: dy @ W.T))
case("dW transposed", "dW has W's shape (out, in): flatten to 2-D, then dy^T @ x (not x^T @ dy)",
     linear_backward=_backward(dW=lambda dy, x, W: _rows(x).T @ _rows(dy)))
case("dW averaged over the rows", SUMMED,
     linear_backward=_backward(dW=lambda dy, x, W: _rows(dy).T @ _rows(x) / len(_rows(x))))
case("dW of the first sequence only", FLATTEN,
     linear_backward=_backward(dW=lambda dy, x, W: dy[0].T @ x[0] if dy.ndim == 3 else _rows(dy).T @ _rows(x)))
case("dW of the last sequence only", FLATTEN,
     linear_backward=_backward(dW=lambda dy, x, W: dy[-1].T @ x[-1] if dy.ndim == 3 else _rows(dy).T @ _rows(x)))
case("dW divided by the batch size", SUMMED,
     linear_backward=_backward(dW=lambda dy, x, W: _rows(dy).T @ _rows(x) / len(x)))
case("db averaged instead of summed", "db is the SUM of dy over the rows, not the mean: the bias is added to every row",
     linear_backward=_backward(db=lambda dy, x, W: _rows(dy).mean(axis=0)))
case("db of the first sequence only", "db sums dy over every leading axis (B and T), not only the first sequence: "
                                      "flatten dy to 2-D first",
     linear_backward=_backward(db=lambda dy, x, W: dy[0].sum(axis=0) if dy.ndim == 3 else _rows(dy).sum(axis=0)))
