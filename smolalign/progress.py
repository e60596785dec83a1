"""Progress (counts and rates) of the long steps smolalign drives: dataset download and tokenization (datasets' own
bars), packing, pair generation and evaluation.

Bars are on where stderr is a terminal. `SMOLALIGN_PROGRESS=1` turns them on elsewhere, `0` turns them off (a test
suite, a CI log). Where bars are off, pair generation and evaluation still print one line per batch, with the count
and the rate, so a job's log shows how far it got.
"""

import os
import sys
import time

ENV = "SMOLALIGN_PROGRESS"


def bars_on() -> bool:
    value = os.environ.get(ENV, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return sys.stderr.isatty()


def datasets_bars() -> None:
    """Switch datasets' bars (`map`: tokenization, packing; split generation) and the hub's (dataset and model
    downloads) on or off for what follows."""
    import datasets
    import huggingface_hub.utils

    if bars_on():
        datasets.enable_progress_bars()
        huggingface_hub.utils.enable_progress_bars()
    else:
        datasets.disable_progress_bars()
        huggingface_hub.utils.disable_progress_bars()


class Progress:
    """`done`/`total` of one step and its rate: a tqdm bar, or a line per update where bars are off."""

    def __init__(self, total: int, description: str, unit: str):
        self.total, self.description, self.unit, self.done = total, description, unit, 0
        self.started = time.monotonic()
        self.bar = None
        if bars_on():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=description, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True)

    def update(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
            return
        elapsed = time.monotonic() - self.started
        rate = f", {self.done / elapsed:.3g} {self.unit}/s" if elapsed > 0 else ""
        print(f"{self.description}: {self.done}/{self.total} {self.unit}{rate}", file=sys.stderr, flush=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
