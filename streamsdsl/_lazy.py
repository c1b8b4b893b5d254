"""Names a package exports without importing their modules until first use (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``homes[name]`` on first use of ``name``."""

    def getattr_(name: str) -> Any:
        if name in homes:
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return getattr_
