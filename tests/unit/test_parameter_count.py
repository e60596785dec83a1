"""Parameter counts read from weight headers: right, and read once per version of a file."""

import json
import struct

from smolalign.models import size


def write_safetensors(path, shapes: dict) -> None:
    header, offset = {}, 0
    for name, shape in shapes.items():
        count = 1
        for dim in shape:
            count *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * count]}
        offset += 4 * count
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def test_a_file_is_read_once_until_it_changes(tmp_path, monkeypatch):
    reads = []
    real = size._safetensors_count
    monkeypatch.setattr(size, "_safetensors_count", lambda path: reads.append(path) or real(path))
    write_safetensors(tmp_path / "model.safetensors", {"a": [3, 4], "b": [5]})
    assert size.parameter_count(str(tmp_path)) == 17  # 3 × 4 + 5
    assert size.parameter_count(str(tmp_path)) == 17
    assert len(reads) == 1
    write_safetensors(tmp_path / "model.safetensors", {"a": [3, 4], "b": [5], "c": [2, 2, 2]})
    assert size.parameter_count(str(tmp_path)) == 25  # rewritten: read again
    assert len(reads) == 2
