"""What the GPU tests read back from disk."""

import json
import struct
from pathlib import Path


def saved_dtypes(model_dir: Path) -> set[str]:
    """The dtypes of every tensor in a saved model's safetensors files, read from their headers."""
    dtypes = set()
    for path in Path(model_dir).glob("*.safetensors"):
        with path.open("rb") as handle:
            size = struct.unpack("<Q", handle.read(8))[0]
            header = json.loads(handle.read(size))
        dtypes |= {entry["dtype"] for name, entry in header.items() if name != "__metadata__"}
    return dtypes


def metric_rows(run_dir: Path) -> list[dict]:
    from smolalign.runs.metrics import read_metrics

    rows = read_metrics(run_dir)
    assert rows, f"no metrics.jsonl rows in {run_dir}"
    return rows
