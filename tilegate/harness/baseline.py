"""The per-device baselines that the perf and counter tiers judge a run against, and what a
judgement finds: one file per device under suite/baselines/<tier>/, one record per finding."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


def device_slug(name: str) -> str:
    """A device name as a file name: "NVIDIA H200" -> "nvidia-h200"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True)
class Regression:
    """One figure of one record that moved past its bound (``baseline`` None: no baseline entry;
    ``value`` None: no value this run)."""

    key: str
    figure: str
    value: float | None
    baseline: float | None
    bound: str  # the allowed move, in words: "-15%", "+10% +0.02"
    note: str = ""

    @property
    def missing_baseline(self) -> bool:
        return self.baseline is None

    def __str__(self) -> str:
        if self.baseline is None:
            return (
                f"{self.key}: no baseline entry for {self.figure} (record one with the tier's "
                "--update-*-baseline)"
            )
        if self.value is None:
            return f"{self.key}: {self.figure}: no value this run (baseline {self.baseline:.3g})"
        note = f", {self.note}" if self.note else ""
        return (
            f"{self.key}: {self.figure} {self.value:.3g}, baseline {self.baseline:.3g} "
            f"(allowed {self.bound}{note})"
        )


@dataclass(frozen=True)
class BaselineStore:
    """``folder``/<device>.json holding ``{"device": name, section: {key: entry}}``."""

    folder: Path
    section: str

    def path(self, device: str) -> Path:
        return self.folder / f"{device_slug(device)}.json"

    def load(self, device: str) -> dict | None:
        path = self.path(device)
        return json.loads(path.read_text()) if path.is_file() else None

    def entries(self, device: str) -> dict:
        return (self.load(device) or {}).get(self.section, {})

    def merge(self, device: str, entries: dict) -> Path:
        """Write ``entries`` into the device's file; other keys' entries stay."""
        path = self.path(device)
        data = self.load(device) or {"device": device, self.section: {}}
        data[self.section].update(entries)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return path
