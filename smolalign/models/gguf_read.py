"""Reading a GGUF file once for all of transformers' loaders.

transformers' GGUF support builds a new `gguf.GGUFReader` of the whole file for every question it asks: the config,
the tokenizer (twice: once for its config, once for its vocabulary), the tensors. The reader turns each of the
file's metadata array entries into views of a `numpy.memmap`, whose slicing runs in Python (memmap's `__getitem__`
and `__array_finalize__`): for a 49,152-token vocabulary and its merges ~4.5 s on a 2-core CPU, and transformers'
reading of those views as much again. Converting the bundled SmolLM2 read the file four times. Its weight-name
mapping also builds gguf's name table (`get_tensor_name_map`, ~25 ms) once per module of the model: 397 times for
SmolLM2-135M.

While `read_once()` is open, each file gets one reader (keyed by its path, size and modification time) whose data
is a plain ndarray view of the same mapped bytes (no copy; slicing it stays in C: 1.5 s instead of 4.9 s), and each
(architecture, layer count) one name table. transformers imports both from the `gguf` module inside each call, so
swapping the module's attributes reaches every loader. A reader is only read (its fields and the mapped tensor
data); nothing the loaders do writes to it.
"""

import contextlib
import functools
import os
from collections.abc import Iterator


def _plain_reader_class(reader_class: type) -> type:
    """`reader_class` with its memory map kept as a plain ndarray view of the same bytes."""
    import numpy as np

    class PlainArrayReader(reader_class):
        @property
        def data(self):
            return self._plain_data

        @data.setter
        def data(self, mapped):
            self._plain_data = mapped.view(np.ndarray)

    return PlainArrayReader


@contextlib.contextmanager
def read_once() -> Iterator[None]:
    """Within the block, transformers' GGUF loaders share one reader per file and one name table per model shape."""
    import gguf

    if getattr(gguf.GGUFReader, "shares_readers", False):  # an enclosing block already shares them
        yield
        return
    readers: dict[tuple, object] = {}
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    plain_reader_class = _plain_reader_class(reader_class)

    def shared_reader(path, mode="r"):
        if mode != "r":
            return reader_class(path, mode)
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
        if key not in readers:
            readers[key] = plain_reader_class(path, mode)
        return readers[key]

    shared_reader.shares_readers = True
    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map
