"""Sizes and counts written for people (plans and messages): bytes in KB/MB/GB, parameter counts as 135M or 1.7B.
Depends on nothing, so any module can report a size without importing what measures it."""


def describe_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def describe_count(n: int) -> str:
    """135M, 1.7B, 104,512."""
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.0f}M"
    return f"{n:,}"
