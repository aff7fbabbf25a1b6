"""A JAX training loop, the shape that died while checkpointed: a jit'd step on parameters in device
memory, XLA's own allocator and threads. Writes "ITER LOSS INTACT" to /out/jax.txt after every step:
INTACT says a device array filled at start still holds what was written (device data survived)."""
import os
import time

import jax
import jax.numpy as jnp

key = jax.random.PRNGKey(0)
w = jax.random.normal(key, (1024, 1024), dtype=jnp.float32) * 0.01
x = jax.random.normal(jax.random.PRNGKey(1), (512, 1024), dtype=jnp.float32)
keep = jnp.arange(1 << 22, dtype=jnp.float32)  # 16 MiB that must come back as they were
want = float(keep.sum())


@jax.jit
def step(w, x):
    def loss(w):
        return (jnp.tanh(x @ w) ** 2).mean()
    l, g = jax.value_and_grad(loss)(w)
    return w - 0.1 * g, l


it = 0
while True:
    w, l = step(w, x)
    it += 1
    if it % 20 == 0:
        intact = float(keep.sum()) == want
        with open("/out/jax.txt.tmp", "w") as f:
            f.write(f"{it} {float(l):.6f} {intact}\n")
        os.replace("/out/jax.txt.tmp", "/out/jax.txt")
    time.sleep(0.002)
