"""The function's tests, in plain Python: `python3 -m unittest`.

The guest SDK that `wasmrpc build` bundles is vendored in wasmrpc/python by `wasmrpc new`, so these
run without installing anything.
"""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "wasmrpc" / "python"))

from app import scale  # noqa: E402
from wasmrpc_guest import Tensor  # noqa: E402


class ScaleTest(unittest.TestCase):
    def test_scales_every_element(self):
        out = scale(Tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float32"), Tensor(2.5, dtype="float32"))
        self.assertEqual(out.shape, (2, 2))
        self.assertEqual(out.flat(), [2.5, 5.0, 7.5, 10.0])


if __name__ == "__main__":
    unittest.main()
