"""What streamsdsl ships to a Spark cluster whose Python lacks it.

On a cluster, Spark's Python processes (the executors' workers, and the driver's own planners of
Python data sources) run ``spark.pyspark.python``, an interpreter that has PySpark and its own
dependencies (pandas, pyarrow, numpy, protobuf) but, as a rule, not streamsdsl nor what it adds
(attrs, confluent-kafka). `Bundle` is what makes them importable there, the way Spark's Python
package management documents it:

* the **pure-Python** packages (streamsdsl and its pure dependencies) in **one zip on**
  ``spark.submit.pyFiles`` (and ``spark.files``, which copies it to every executor): every Python
  process Spark starts puts each such zip on its ``sys.path``; each module's bytecode beside its
  source (`_bytecode`: Python compiles no cache into a zip, so without it every such process
  compiled what it imports);
* each package with **native code** (confluent-kafka: its extension module and, beside it, the
  ``confluent_kafka.libs`` directory with librdkafka, which a zip cannot hold: Python does not
  load extension modules from a zip) as an **archive on** ``spark.archives``, unpacked under its own
  top-level name into Spark's files directory, which is also on every Python process's
  ``sys.path``: ``confluent_kafka.tgz#confluent_kafka`` becomes ``<files>/confluent_kafka/`` (on
  YARN, a link in the container to where the NodeManager unpacked it: `streamsdsl._shipped`);
* and, for the Python processes Spark starts **on the driver**, the bundle's own paths on this
  machine in ``spark.executorEnv.PYTHONPATH`` (which PySpark passes to every Python function's
  process, the driver's included): Spark 4.2 starts the runner of a Python **streaming** source
  on the driver with its files directory set to ``<files>/streaming_job``, where neither the
  zip nor the archives are, so the runner would not find them. On an executor of another machine
  those paths do not exist and are skipped.

Why not a packed environment (``venv-pack`` on ``spark.archives`` with
``spark.pyspark.python=./env/bin/python``)? It replaces the cluster's interpreter with one this
machine built (≈ 1 GB with PySpark, sent to every executor at every application start), while the
cluster's own interpreter, which a platform team maintains with PySpark's dependencies, already has
all but ≈ 18 MB of what streamsdsl needs. The native part must match the cluster's Python (the
same ``major.minor`` and platform: `Bundle.python_tag`); a worker whose interpreter differs gets a
`streamsdsl.runtime.session.PythonWorkerError` that says so.

What PySpark needs itself (`PROVIDED`) is not shipped. A bundle is built once per content (the
versions and files of what it holds, this interpreter's version and platform) into
``<cache>/ship/<key>/`` (`streamsdsl.maven.cache_dir`), atomically, so concurrent sessions share it;
bundles of other content older than a week are removed then.
``streamsdsl ship`` prints the ``spark-submit`` options of a bundle (docs/deploy.md).

Examples
--------
>>> bundle = build()
>>> [os.path.basename(p) for p in bundle.py_files]  # doctest: +ELLIPSIS
['streamsdsl-...-py.zip']
>>> sorted(a.split("#")[1] for a in bundle.archives)
['confluent_kafka', 'confluent_kafka.libs']
>>> build() == bundle  # cached
True
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import importlib.util
import os
import platform
import py_compile
import re
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from streamsdsl.maven import cache_dir

__all__ = ["PROVIDED", "Bundle", "build", "distributions", "is_cluster_master", "ship_settings"]

#: Distributions a cluster's Python has already: PySpark (from the Spark installation's zips) and
#: what PySpark's own SQL and pandas support need. They are never shipped.
PROVIDED = frozenset({
    "pyspark", "py4j", "pyarrow", "pandas", "numpy", "protobuf", "python-dateutil", "pytz", "tzdata", "six",
    "grpcio", "grpcio-status", "googleapis-common-protos", "zstandard",
})

#: The settings a bundle is added to, each a comma-separated list Spark reads.
PY_FILES_CONF = "spark.submit.pyFiles"
FILES_CONF = "spark.files"
ARCHIVES_CONF = "spark.archives"
PYTHONPATH_CONF = "spark.executorEnv.PYTHONPATH"

_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")
_SKIP_DIRS = {"__pycache__"}


@attrs.frozen
class Bundle:
    """A built bundle: the zips for ``spark.submit.pyFiles`` and the archives (``path#name``) for
    ``spark.archives``, in ``directory`` (named by ``key``)."""

    key: str
    directory: Path
    py_files: tuple[str, ...]
    archives: tuple[str, ...]
    #: ``cp311-x86_64``: what a cluster's Python must be to load the native part.
    python_tag: str

    @property
    def python_path(self) -> tuple[str, ...]:
        """The bundle on this machine, as ``PYTHONPATH`` entries: the zips, and the ``site``
        directory holding the native packages unpacked."""
        return (*self.py_files, str(self.directory / "site"))

    def spark_conf(self, conf: Mapping[str, Any] | None = None) -> dict[str, str]:
        """The settings that ship this bundle, merged into ``conf``'s own lists (only the keys
        that change; entries already there are kept first, none is repeated).

        >>> b = Bundle("k", Path("/c"), ("/c/a.zip",), ("/c/n.tgz#n",), "cp311-x86_64")
        >>> b.spark_conf({"spark.files": "/data/x.csv"})  # doctest: +NORMALIZE_WHITESPACE
        {'spark.submit.pyFiles': '/c/a.zip', 'spark.files': '/data/x.csv,/c/a.zip', 'spark.archives': '/c/n.tgz#n',
         'spark.executorEnv.PYTHONPATH': '/c/a.zip:/c/site'}
        """
        conf = conf or {}
        out = {}
        for key, entries, sep in ((PY_FILES_CONF, self.py_files, ","), (FILES_CONF, self.py_files, ","),
                                  (ARCHIVES_CONF, self.archives, ","), (PYTHONPATH_CONF, self.python_path, os.pathsep)):
            current = [e for e in str(conf.get(key, "") or "").split(sep) if e.strip()]
            merged = current + [e for e in entries if e not in current]
            if merged != current:
                out[key] = sep.join(merged)
        return out

    def submit_options(self) -> list[str]:
        """The ``spark-submit`` options that ship this bundle (``--py-files`` also copies the zip to
        the executors, as ``spark.files`` does).

        >>> Bundle("k", Path("/c"), ("/c/a.zip",), ("/c/n.tgz#n",), "cp311-x86_64").submit_options()
        ['--py-files', '/c/a.zip', '--archives', '/c/n.tgz#n', '--conf', 'spark.executorEnv.PYTHONPATH=/c/a.zip:/c/site']
        """
        out = []
        if self.py_files:
            out += ["--py-files", ",".join(self.py_files)]
        if self.archives:
            out += ["--archives", ",".join(self.archives)]
        return out + ["--conf", f"{PYTHONPATH_CONF}={os.pathsep.join(self.python_path)}"]


def is_cluster_master(master: str | None) -> bool:
    """Whether executors may run where this interpreter's packages are not: a cluster manager's
    master (``spark://``, ``yarn``, ``k8s://``, ...), not ``local``, ``local[n]`` or
    ``local-cluster[...]`` (whose executors run on this machine with this interpreter).

    >>> [is_cluster_master(m) for m in ("local[2]", "local-cluster[2,1,1024]", "spark://h:7077", "yarn", None)]
    [False, False, True, True, False]
    """
    return bool(master) and not str(master).startswith("local")


def ship_settings(conf: Mapping[str, Any], master: str | None, ship: bool | None = None) -> dict[str, str]:
    """The settings that ship streamsdsl to ``master``'s executors, for a session about to be built
    with ``conf``: a `build`-t bundle's `Bundle.spark_conf` when ``ship`` is true, or when it is
    ``None`` and the master is a cluster's (`is_cluster_master`); else nothing.

    >>> ship_settings({}, "local[2]")
    {}
    >>> sorted(ship_settings({}, "spark://127.0.0.1:7077"))
    ['spark.archives', 'spark.executorEnv.PYTHONPATH', 'spark.files', 'spark.submit.pyFiles']
    """
    if ship is False or (ship is None and not is_cluster_master(master)):
        return {}
    return build().spark_conf(conf)


def distributions(root: str = "streamsdsl") -> list[metadata.Distribution]:
    """``root`` and the distributions it requires, transitively (extras left out, markers
    evaluated for this interpreter), without `PROVIDED`; in a stable order."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = _canonical(todo.pop(0))
        if name in seen or name in PROVIDED:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement this interpreter does not need (or lacks): nothing to ship
        seen[name] = dist
        todo.extend(r for r in (_required(req) for req in dist.requires or ()) if r)
    return list(seen.values())


#: The bundle's layout, in its cache key: since 2 the bytecode of each module beside its source in
#: the zip, since 3 compiled without optimization (``assert`` kept, whatever ``-O`` the builder ran with).
_FORMAT = 3


def build(root: str = "streamsdsl") -> Bundle:
    """The bundle of ``root`` and its requirements (`distributions`), built into the user's
    cache unless a bundle of the same content is there."""
    parts = [part for dist in distributions(root) for part in _parts(dist)]
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}-{platform.machine()}"
    digest = hashlib.sha256(f"{_FORMAT}\0{tag}".encode())
    for name, path, _ in parts:
        digest.update(f"\0{name}".encode())
        for file in _files(path):
            stat = file.stat()
            digest.update(f"\0{file.relative_to(path.parent)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    key = digest.hexdigest()[:16]
    version = _version(root)
    target = cache_dir() / "ship" / key
    zip_name = f"{root}-{version}-{key}-py.zip"
    native = sorted(name for name, _, is_native in parts if is_native)
    bundle = Bundle(
        key=key, directory=target, python_tag=tag,
        py_files=(str(target / zip_name),),
        archives=tuple(f"{target / (name + '.tgz')}#{name}" for name in native),
    )
    if target.is_dir():
        with contextlib.suppress(OSError):
            os.utime(target)  # in use: kept by `_prune`
        return bundle
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".building-") as tmp:
        with zipfile.ZipFile(Path(tmp) / zip_name, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, path, is_native in parts:
                if not is_native:
                    for file in _files(path):
                        member = str(file.relative_to(path.parent))
                        archive.write(file, member)
                        compiled = _bytecode(file, f"{zip_name}/{member}", Path(tmp) / "bytecode" / member)
                        if compiled is not None:
                            archive.write(compiled, member + "c")
        for name, path, is_native in parts:
            if is_native:
                shutil.copytree(path, Path(tmp) / "site" / name, ignore=shutil.ignore_patterns("__pycache__"))
                with tarfile.open(Path(tmp) / f"{name}.tgz", "w:gz", compresslevel=1) as archive:
                    # the archive's root is the package's own directory: Spark unpacks it as <files>/<name>/
                    for file in _files(path):
                        archive.add(file, str(file.relative_to(path)), recursive=False)
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():  # else a concurrent build put it there first
                raise
        else:
            os.makedirs(tmp)  # for TemporaryDirectory's cleanup
    _prune(target)
    return bundle


#: Bundles not built or used for this long are removed when another is built (a running application
#: serves its bundle's files to executors that start later: not removed while it may run).
_KEEP_S = 7 * 24 * 3600


def _prune(current: Path) -> None:
    """Remove the other bundles of the cache built more than `_KEEP_S` ago."""
    now = time.time()
    for other in current.parent.iterdir():
        if other != current and not other.name.startswith(".") and other.is_dir():
            with contextlib.suppress(OSError):
                if now - other.stat().st_mtime > _KEEP_S:
                    shutil.rmtree(other)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _required(requirement: str) -> str | None:
    """The distribution a requirement line names, or ``None`` when its marker excludes it here
    (an extra's requirement always does)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if name is None:
        return None
    _, _, marker = requirement.partition(";")
    if "extra" in marker:
        return None
    if marker.strip():
        try:
            from packaging.markers import Marker
        except ImportError:  # pragma: no cover - without packaging, a marker's requirement is shipped if installed
            return name.group(1)
        if not Marker(marker.strip()).evaluate():
            return None
    return name.group(1)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout without an install
        return "0"


def _parts(dist: metadata.Distribution) -> Iterator[tuple[str, Path, bool]]:
    """``(top-level name, path, native)`` of what ``dist`` installs: its packages and modules,
    found where Python imports them (an editable install's are in its checkout), and the
    ``<name>.libs`` directories of bundled shared libraries (auditwheel's), native."""
    top = (dist.read_text("top_level.txt") or "").split()
    files = [str(f) for f in dist.files or ()]
    if not top:
        top = sorted({f.split("/")[0].removesuffix(".py") for f in files
                      if not f.split("/")[0].endswith((".dist-info", ".egg-info", ".data", ".pth", ".libs"))
                      and not f.startswith("..") and (f.endswith(".py") or "/" in f)})
    for name in top:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin in (None, "built-in", "frozen"):
            continue
        path = Path(spec.submodule_search_locations[0]) if spec.submodule_search_locations else Path(spec.origin)
        yield name, path, any(f.suffix in _NATIVE_SUFFIXES or ".so." in f.name for f in _files(path))
    for libs in sorted({f.split("/")[0] for f in files if f.split("/")[0].endswith(".libs")}):
        path = Path(str(dist.locate_file(libs)))
        if path.is_dir():
            yield libs, path, True


def _bytecode(source: Path, shown: str, target: Path) -> Path | None:
    """``source`` (a ``.py`` file) compiled by this interpreter into ``target`` (else None): the
    bytecode Python imports from a zip only when the zip holds it, beside the source (a ``.pyc`` of
    the same name), since Python writes no bytecode cache into a zip. Without it, every Python
    process Spark starts (an executor's worker, a planner process of the driver, which Spark also
    runs to plan a Python data source's write) compiles each module it imports from the zip again
    (0.14-0.18 s for the Kafka data source's module measured, 0.045 s with the bytecode). Its
    validation is an unchecked hash (the zip's content does not change under it); an interpreter
    of another version finds another magic number and compiles the source, as without it.
    ``shown`` is the file name its tracebacks show (the zip's name and the member)."""
    if source.suffix != ".py":
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        py_compile.compile(str(source), cfile=str(target), dfile=shown, doraise=True, optimize=0,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except py_compile.PyCompileError:  # not this interpreter's syntax: shipped as source only
        return None
    return target


def _files(path: Path) -> list[Path]:
    """The files of a package directory (or the module file), sorted, without bytecode caches."""
    if path.is_file():
        return [path]
    out = []
    for directory, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        out.extend(Path(directory) / n for n in sorted(names) if not n.endswith((".pyc", ".lock")))
    return out
