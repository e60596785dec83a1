"""`python -m smolalign.accelerate_config PRESET PROCESSES`: write the accelerate config a preset launches with on
GPUs (and the DeepSpeed JSON a DeepSpeed preset names) and print its path. A Slurm job's nodes run it, in the image
or in the job's environment, so that they launch with the DeepSpeed config `--launch` uses, not DeepSpeed's defaults."""

import sys

from smolalign.launch import preset_path, written_accelerate_config


def main(argv: list[str] | None = None) -> None:
    preset, processes = argv if argv is not None else sys.argv[1:]
    print(written_accelerate_config(preset_path(preset), int(processes))[0])


if __name__ == "__main__":
    main()
