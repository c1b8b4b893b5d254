"""streamsdsl imported from the zip it ships (`streamsdsl.runtime.shipping`): its native archives made importable.

`streamsdsl.runtime.shipping` sends the packages with native code (confluent-kafka) as archives,
each unpacked under its own name *beside* the zip: in Spark's files directory (a standalone or
Kubernetes executor), or in the container's directory where YARN's NodeManager links what it
localized (``--archives`` on YARN). Two things differ on YARN, and `use_native_archives` (run when
streamsdsl is imported from a zip, before anything imports confluent-kafka) mends both:

* a driver in YARN's cluster mode runs the application's script with the script's own directory
  first on ``sys.path``, not the container's, where the archives are: the zip's directory is
  appended to ``sys.path`` when it holds an archive's package that nothing else on the path
  provides;
* YARN unpacks each archive in its cache and links it into the container
  (``confluent_kafka -> .../filecache/12/confluent_kafka.tgz``), so the extension module's
  run-time search path ``$ORIGIN/../confluent_kafka.libs`` leads into the cache, where
  ``confluent_kafka.libs`` is not: when the package Python finds is such a link, with its
  ``<name>.libs`` linked beside it, the shared libraries there are loaded first, by their path,
  and the extension module finds them loaded.

Imported from an installed streamsdsl, nothing happens.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys

__all__ = ["use_native_archives"]


def use_native_archives(package_file: str) -> None:
    """For streamsdsl's ``__init__.py`` at ``package_file``: when it is in a zip, make the native
    archives beside the zip importable (see the module's documentation). Never raises: what still
    cannot be imported fails where it is imported, with its own error."""
    archive = os.path.dirname(os.path.dirname(package_file))
    if not archive.endswith(".zip"):
        return
    home = os.path.abspath(os.path.dirname(archive) or ".")
    if any(importlib.util.find_spec(name) is None for name in _native_names(home)):
        sys.path.append(home)
    # where the packages are found (beside the zip, or in another entry of sys.path: a YARN
    # executor's Python puts its container's directory first)
    for entry in dict.fromkeys([*sys.path, home]):
        for name in _native_names(entry or "."):
            package = os.path.join(entry or ".", name)
            spec = importlib.util.find_spec(name)
            found = os.path.dirname(spec.origin or "") if spec is not None else ""
            if os.path.islink(package) and os.path.abspath(found) == os.path.abspath(package):
                _load_libraries(f"{package}.libs")


def _native_names(directory: str) -> list[str]:
    """The packages of ``directory`` that have a ``<name>.libs`` directory beside them."""
    try:
        names = os.listdir(directory)
    except OSError:  # not a directory: a zip, an absent entry
        return []
    return [n[: -len(".libs")] for n in names
            if n.endswith(".libs") and n[: -len(".libs")] in names and os.path.isdir(os.path.join(directory, n))]


def _load_libraries(directory: str) -> None:
    """Load every shared library of ``directory`` (each finds its own dependencies there through
    its run-time path ``$ORIGIN``); one that fails is left to fail where it is needed."""
    for name in sorted(os.listdir(directory)):
        if ".so" in name:
            try:
                ctypes.CDLL(os.path.join(os.path.abspath(directory), name), mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
