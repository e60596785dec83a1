"""Chat templates: resolving shipped names and files, rendering with trained spans, and the checks run on them."""
