"""Solution: the fully connected layer."""


def linear_forward(x, W, b):
    y = x @ W.T + b
    cache = (x, W)
    return y, cache


def linear_backward(dy, cache):
    x, W = cache
    dx = dy @ W                                   # (..., out) @ (out, in) -> (..., in)
    dy2 = dy.reshape(-1, dy.shape[-1])            # (N, out)
    x2 = x.reshape(-1, x.shape[-1])               # (N, in)
    dW = dy2.T @ x2                               # (out, in)
    db = dy2.sum(axis=0)                          # (out,)
    return dx, dW, db
