"""Whether this process may download from the Hugging Face hub, decided once: HF_HUB_OFFLINE (or
TRANSFORMERS_OFFLINE) set, or the hub's endpoint asked once before the first download.

An unreachable hub would otherwise cost every file huggingface_hub asks for five retries and 23 s of back-off before
the error: a dry run on a machine without network took 30-55 s to say so. When the endpoint does not answer,
huggingface_hub, transformers and datasets are switched to their local caches for the rest of the process: a
source that is cached loads as usual, one that is not fails at once, and the message says why.
"""

import functools
import os
import sys

OFFLINE_VALUES = ("1", "ON", "YES", "TRUE")
PROBE_TIMEOUT_S = 5.0
"""A connection that takes longer is as good as none: the hub answers a HEAD request in well under a second."""


def offline_by_setting() -> bool:
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to a true value in this process's environment (huggingface_hub's
    own reading of them)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in OFFLINE_VALUES


def offline_reason() -> str | None:
    """Why hub downloads are off here, in words for an error message, or None when the hub may be reached. The
    endpoint is asked once per process, the first time a hub source is about to be read."""
    if offline_by_setting():
        return "HF_HUB_OFFLINE is set"
    return _unreachable()


@functools.cache
def _unreachable() -> str | None:
    import httpx
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint = constants.ENDPOINT
    try:
        # huggingface_hub's own client: its proxies, its headers; any HTTP answer, even an error status, is a hub
        # that answers.
        get_session().head(endpoint, timeout=PROBE_TIMEOUT_S)
    except httpx.TransportError as exc:
        _use_local_caches()
        detail = " ".join(str(exc).split()) or type(exc).__name__
        print(f"note: the hub ({endpoint}) does not answer from here ({detail}): hub models and datasets are read "
              "from the local caches only", file=sys.stderr)
        return f"the hub ({endpoint}) does not answer from here ({detail})"
    return None


def _use_local_caches() -> None:
    """huggingface_hub's offline switch, which transformers reads too, and datasets' own copy of it (taken when
    datasets is imported: imported here, so that a later import cannot take the old value). This process's
    environment is left as it was."""
    import datasets.config
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True
    datasets.config.HF_HUB_OFFLINE = True
