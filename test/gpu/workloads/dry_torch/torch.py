# PyTorch's stand-in for the dry runs of test/gpu/run-pod-runsc.sh (DRY=1, a machine without a GPU):
# the few calls of shapes_workload.py's sglang shape, on the CPU, so that its processes (the spawn
# workers, the tokenizer fed through mp.Queue, the HTTP front end) run as they do on the GPU. A
# "tensor" of randint is 1 MiB of values in [low, high) drawn from its generator's seed, summed
# again at each call: memory that did not survive a checkpoint shows as another checksum.
import random

int32 = 'int32'


class Generator:
    def __init__(self, device=None):
        self.seed = 0

    def manual_seed(self, seed):
        self.seed = seed
        return self


class Tensor:
    def __init__(self, data):
        self.data = data

    def sum(self):
        return sum(self.data)

    def __matmul__(self, other):
        return self


def randint(low, high, size, device=None, dtype=None, generator=None):
    r = random.Random(generator.seed if generator else 0)
    return Tensor(bytearray(low + b % (high - low) for b in r.randbytes(1 << 20)))


def randn(*size, device=None):
    return Tensor(bytearray(16))


def tanh(t):
    return t
