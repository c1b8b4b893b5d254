"""The runnable examples (``examples/``, not a package) as modules, for the tests that run them
or take their data."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["EXAMPLES", "load_example"]

#: The directory of the examples.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@functools.cache
def load_example(name: str) -> ModuleType:
    """``examples/<name>.py`` (``name`` may be a path below ``examples/``, e.g.
    ``deploy/build_context``) as a module, loaded once."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name.replace('/', '_')}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
