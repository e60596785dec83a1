"""The TRL config one process of a launched run builds (WORLD_SIZE set by its launcher), built here in-process as the
config check builds it (no accelerate state is set up): the values the trainer uses, for tests that would otherwise
read the plan's text about them."""

import os
from pathlib import Path


def launched_sft_config(recipe: str, overrides: list[str], world: int, run_dir: Path):
    """(SFTConfig, hardware) as each of `world` processes builds them for `recipe` with `overrides`."""
    from recipe_runs import loaded_run

    from smolalign.hardware import detect_hardware
    from smolalign.stages.sft import sft_config

    saved = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(world)
    try:
        loaded = loaded_run(recipe, overrides, "sft")
        hardware = detect_hardware()
    finally:
        os.environ.pop("WORLD_SIZE")
    if saved is not None:
        os.environ["WORLD_SIZE"] = saved
    return sft_config(loaded, hardware, run_dir, check=True), hardware
