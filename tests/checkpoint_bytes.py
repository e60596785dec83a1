"""Checkpoint files built byte by byte from the formats' specifications (no torch): safetensors files, torch.save-like
zip archives and the files of a trainer's `checkpoint-N`, whole or damaged, for the tests of the readers that must
refuse damaged ones."""

import io
import json
import struct
import zipfile

ITEMSIZE = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8}


def safetensors(tensors: dict[str, tuple[str, list[int]]], metadata: dict | None = None) -> bytes:
    """A valid safetensors file (https://github.com/huggingface/safetensors#format): u64 header length, JSON header,
    then the data (zeros)."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape) in tensors.items():
        size = ITEMSIZE[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + bytes(offset)


def raw_safetensors(header, data: bytes = b"") -> bytes:
    """A file with any header (a dict, a list, a string: whatever it is, JSON-encoded) and data."""
    encoded = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def torch_archive(payload: bytes = b"\x80\x02}q\x00.") -> bytes:
    """A zip laid out like torch.save's (archive/data.pkl + version, stored uncompressed)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", b"3\n")
        archive.writestr("archive/data/0", bytes(256))
    return buffer.getvalue()


def trainer_checkpoint(step: int, prefix: str = "") -> dict[str, bytes]:
    """The files the HF Trainer writes into checkpoint-N (full weights, optimizer, scheduler, RNG, state, args)."""
    folder = f"{prefix}checkpoint-{step}/"
    return {folder + "config.json": b'{"model_type": "llama"}',
            folder + "model.safetensors": safetensors({"model.embed_tokens.weight": ("F32", [8, 4])}),
            folder + "optimizer.pt": torch_archive(), folder + "scheduler.pt": torch_archive(),
            folder + "rng_state.pth": torch_archive(), folder + "training_args.bin": torch_archive(),
            folder + "trainer_state.json": json.dumps({"global_step": step, "log_history": []}).encode()}
