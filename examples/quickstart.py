"""A first look at lazyarray: eager arrays, autograd, and deferred compute."""
import numpy as np

import lazyarray as la

x = la.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]])
print("x =", x)
print("relu(x) * 2 + 1 =", la.relu(x) * 2 + 1)

# Eager autograd: gradients flow back through broadcasting.
w = la.array([0.1, 0.2, 0.3])
w.attach_grad()
with la.autograd.record():
    loss = la.square(x * w).sum()
loss.backward()
print("d loss / d w =", w.grad)
np.testing.assert_allclose(w.grad.asnumpy(), (2 * x.asnumpy() ** 2 * w.asnumpy()).sum(0), rtol=1e-5)

# Deferred compute: the same code records a graph instead of computing.
with la.deferred():
    y = la.nn.softmax(la.nn.dense(x, la.ones((4, 3)), la.zeros(4)))
print("lazy:", y)
print("computed on demand:", y.asnumpy().round(3).tolist())
