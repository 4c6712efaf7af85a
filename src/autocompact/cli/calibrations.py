"""What the chat learned about each model's tokenizer, remembered across sessions.

A new chat on a provider and model seen before starts calibrated: the estimate is 15–40 % low
for some tokenizers (Gemma's, measured on llama.cpp) until the first reported count, and a first
turn can be a large paste. The file is ``calibrations.json`` in the data directory
(``$AUTOCOMPACT_HOME``), written atomically with mode 0600; a damaged file is ignored (the
calibration is relearned), never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from autocompact.errors import ContentError
from autocompact.estimation import Calibration
from autocompact.filemodes import make_private_dirs
from autocompact.jsonsafe import loads

__all__ = ["CALIBRATIONS_FILE", "CalibrationMemory"]

logger = logging.getLogger("autocompact")

CALIBRATIONS_FILE = "calibrations.json"
_VERSION = 1


class CalibrationMemory:
    """The remembered calibrations, one per ``provider:model``.

    Args:
        home: the data directory.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / CALIBRATIONS_FILE

    @staticmethod
    def key(provider: str, model: str) -> str:
        """The entry's key."""
        return f"{provider}:{model}"

    def _read(self) -> dict[str, Any]:
        try:
            data = loads(self.path.read_text("utf-8"))  # (too deep: a JSONDecodeError too)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring %s (it cannot be read: %s)", self.path, exc)
            return {}
        models = data.get("models") if isinstance(data, dict) else None
        return dict(models) if isinstance(models, dict) else {}

    def load(self, provider: str, model: str) -> Calibration | None:
        """The calibration remembered for this provider and model, or ``None``."""
        entry = self._read().get(self.key(provider, model))
        if entry is None:
            return None
        try:
            calibration = Calibration.from_dict(entry)
        except ContentError as exc:
            logger.warning("ignoring the calibration of %s in %s: %s", model, self.path, exc)
            return None
        return calibration if calibration.samples > 0 else None

    def save(self, provider: str, model: str, calibration: Calibration) -> None:
        """Remember ``calibration`` (a calibration with no sample is not worth a write)."""
        if calibration.samples <= 0:
            return
        models = self._read()
        key = self.key(provider, model)
        entry = calibration.to_dict()
        if models.get(key) == entry:
            return
        models[key] = entry
        payload = json.dumps({"version": _VERSION, "models": models}, indent=1, sort_keys=True)
        try:
            make_private_dirs(self.path.parent)  # issue 27: 0700, parents included
            fd, tmp = tempfile.mkstemp(prefix=".calibrations.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(payload + "\n")
                os.chmod(tmp, 0o600)
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:  # remembering is a convenience: never fail the chat over it
            logger.warning("could not remember the calibration in %s: %s", self.path, exc)
