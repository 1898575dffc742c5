"""``numbagrad.Generator``: torch's CPU random engine (mt19937) for the integer draws data loading makes.

torch's CPU generator is a 32-bit Mersenne Twister seeded with ``init_genrand(seed & 0xffffffff)``; ``randperm``
is a Fisher-Yates shuffle drawing ``random() % (n - i)``, ``randint`` draws ``random() % range`` and an int64
``random_()`` draws ``((hi << 32) | lo) % 2**63``. numpy's ``MT19937`` bit generator is the same engine, so with the
state set as ``init_genrand`` sets it, a ``Generator`` seeded like a ``torch.Generator`` gives the same
permutations: ``RandomSampler``, ``random_split``, ``DistributedSampler`` and a shuffled ``DataLoader`` given
``generator=`` match torch's sample for sample. (numbagrad's global generator, ``numbagrad.manual_seed``, is
numpy's PCG64 and does not reproduce torch's streams.)
"""

from __future__ import annotations

import secrets

import numpy as np

from ._tensor import Tensor
from ._types import device, to_device
from .autograd.grad_mode import break_trace
from .ops.creation import _generator

_DEFAULT_SEED = 67280421310721  # torch.Generator().initial_seed()
_MASK64 = (1 << 64) - 1


def _init_genrand(seed32: int) -> np.ndarray:
    """The mt19937 state that ``init_genrand(seed32)`` produces (the reference seeding torch uses)."""
    key = np.empty(624, np.uint32)
    x = seed32 & 0xFFFFFFFF
    key[0] = x
    for i in range(1, 624):
        x = (1812433253 * (x ^ (x >> 30)) + i) & 0xFFFFFFFF
        key[i] = x
    return key


class Generator:
    """A random engine with torch.Generator's seeding API; integer draws match torch's CPU generator."""

    def __init__(self, device: str | device = "cpu") -> None:
        self._device = to_device(device)
        if self._device.type != "cpu":
            raise RuntimeError("numbagrad.Generator supports device='cpu' only")
        self._engine = np.random.MT19937(0)
        self.manual_seed(_DEFAULT_SEED)

    @property
    def device(self) -> device:
        """The device the generator draws for (always cpu)."""
        return self._device

    def manual_seed(self, seed: int) -> Generator:
        """Seed the engine (torch's range: [-2**63, 2**64); negative seeds wrap to 2**64 + seed)."""
        break_trace("seeds a random number generator")  # (a replay would not reseed)
        seed = int(seed)
        if not -(1 << 63) <= seed <= _MASK64:
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed & _MASK64
        self._engine.state = {"bit_generator": "MT19937", "state": {"key": _init_genrand(self._seed), "pos": 624}}
        return self

    def initial_seed(self) -> int:
        """The seed last given to ``manual_seed`` (or ``seed``)."""
        return self._seed

    def seed(self) -> int:
        """Seed from the operating system's entropy and return the seed."""
        s = secrets.randbits(64)
        self.manual_seed(s)
        return s

    def get_state(self):
        """The engine state as an int64 tensor: the seed, the position, then the 624 key words."""
        st = self._engine.state["state"]
        words = np.concatenate([[np.uint64(self._seed).view(np.int64), st["pos"]], st["key"].astype(np.int64)])
        return Tensor._make(words.astype(np.int64))

    def set_state(self, new_state) -> Generator:
        """Restore the engine from a tensor returned by ``get_state``."""
        words = np.asarray(new_state._host() if hasattr(new_state, "_host") else new_state, dtype=np.int64)
        if words.shape != (626,):
            raise RuntimeError("numbagrad.Generator.set_state expects the 626-element tensor get_state returned")
        self._seed = int(words[0]) & _MASK64
        self._engine.state = {
            "bit_generator": "MT19937",
            "state": {"key": words[2:].astype(np.uint32), "pos": int(words[1])},
        }
        return self

    # --- the draws torch's data utilities make --------------------------------------------------------------
    def _random32(self, n: int) -> np.ndarray:
        """``n`` raw 32-bit outputs (torch's ``generator->random()``), as uint64."""
        return self._engine.random_raw(n)

    def _random64(self, n: int) -> np.ndarray:
        """``n`` 64-bit outputs (torch's ``random64()``: two 32-bit draws, the first in the high half)."""
        raw = self._random32(2 * n)
        return (raw[0::2] << np.uint64(32)) | raw[1::2]

    def _random_int64(self) -> int:
        """An int64 ``random_()`` draw: uniform on [0, 2**63)."""
        return int(self._random64(1)[0] % np.uint64(1 << 63))

    def _randint(self, high: int, size: int) -> np.ndarray:
        """``torch.randint(high=high, size=(size,), generator=self)``."""
        if high >= 1 << 32:
            return (self._random64(size) % np.uint64(high)).astype(np.int64)
        return (self._random32(size) % np.uint64(high)).astype(np.int64)

    def _randperm(self, n: int) -> list[int]:
        """``torch.randperm(n, generator=self).tolist()``."""
        if n < 0xFFFFFFFF // 20:  # torch's small-n branch: swap i with i + random() % (n - i)
            perm = list(range(n))
            if n > 1:
                z = (self._random32(n - 1) % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
                for i, zi in enumerate(z):
                    j = i + zi
                    perm[i], perm[j] = perm[j], perm[i]
            return perm
        # torch's large-n branch: the "inside-out" shuffle with 64-bit draws
        perm = [0] * n
        z = (self._random64(n) % np.arange(1, n + 1, dtype=np.uint64)).tolist()
        for i, zi in enumerate(z):
            perm[i] = perm[zi]
            perm[zi] = i
        return perm

    def __repr__(self) -> str:
        return f"<numbagrad.Generator object at {id(self):#x}>"


def _default_seed_generator() -> Generator:
    """A Generator seeded from numbagrad's global generator (what torch does when no ``generator`` is given):
    deterministic after ``numbagrad.manual_seed``."""
    return Generator().manual_seed(int(_generator().integers(0, 1 << 63)))
