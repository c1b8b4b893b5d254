"""Write the build context of a streamsdsl application's image (examples/deploy/Dockerfile).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python examples/deploy/build_context.py CONTEXT --app examples/deploy/app.py [--app FILE ...] [--offline]
    docker build -t IMAGE CONTEXT

``CONTEXT`` (emptied first) receives:

* ``Dockerfile``: a copy of examples/deploy/Dockerfile;
* ``requirements.txt``: the Python distributions the application needs besides PySpark, pinned to
  this environment's versions: PySpark's own Python dependencies (pandas, pyarrow, numpy,
  protobuf and theirs) and streamsdsl's (attrs, confluent-kafka);
* ``dist/``: streamsdsl's wheel, built from this checkout (``pip wheel --no-deps``);
* ``wheels/``: empty, or with ``--offline`` a wheel of each requirement, packed from this
  environment's installed files (byte for byte the same on every run, so Docker's layer cache keeps
  the layer installing them),
  so that ``docker build --build-arg PIP_OPTIONS="--no-index --find-links /tmp/streamsdsl/wheels"``
  needs no package index. Those wheels are for this interpreter's Python version and platform
  (``cp311``, ``x86_64``): the image's Python must match, as the Dockerfile's python3.11 does;
* ``jars/``: the JVM operator's jar (``streamsdsl jar-path``) and Spark's Kafka connector with the
  runtime dependencies Spark lacks (``streamsdsl kafka-connector`` resolves them; without them the
  image has no ``kafka.connector = "jvm"``, which the script says);
* ``app/``: the ``--app`` files.

It prints the context's directory.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = Path(__file__).with_name("Dockerfile")
#: Spark's own: /opt/spark/python/lib in the image holds pyspark.zip and py4j's zip.
SPARK_PROVIDED = frozenset({"pyspark", "py4j"})


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(root: str = "streamsdsl") -> list[metadata.Distribution]:
    """``root``'s requirements, transitively, as installed here (extras left out, markers
    evaluated for this interpreter), without ``root`` itself and `SPARK_PROVIDED`, sorted by name.
    PySpark's own Python dependencies are among them: streamsdsl requires pandas, pyarrow and
    protobuf itself."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [req for req in metadata.requires(root) or ()]
    while todo:
        req = Requirement(todo.pop())
        name = _canonical(req.name)
        if name in seen or name in SPARK_PROVIDED or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        todo.extend(dist.requires or ())
    return [seen[name] for name in sorted(seen)]


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def pack_wheel(dist: metadata.Distribution, target: Path) -> Path:
    """A wheel of the installed distribution ``dist`` in ``target``: its files under
    site-packages as its ``RECORD`` lists them (not its scripts, which pip writes again from the
    entry points, nor byte code), with the tags of its ``WHEEL`` file."""
    dist_info = Path(str(dist._path))  # type: ignore[attr-defined]
    site = dist_info.parent
    wheel_meta = (dist_info / "WHEEL").read_text()
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    pythons, abis, platforms = (".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    path = target / f"{name}-{dist.version}-{pythons}-{abis}-{platforms}.whl"
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as whl:
        for file in dist.files or ():
            arcname = str(file)
            if arcname.startswith("..") or "__pycache__" in file.parts or arcname.endswith(".pyc"):
                continue
            if file.parent.name == dist_info.name and file.name in skip:
                continue
            source = site / file
            if not source.is_file():
                continue
            data = source.read_bytes()
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (source.stat().st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            record.append(_record_line(arcname, data))
        record.append(f"{dist_info.name}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info.name}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o100644 << 16
        whl.writestr(info, "\n".join(record) + "\n", zipfile.ZIP_DEFLATED)
    return path


def build_wheel(target: Path) -> Path:
    """streamsdsl's wheel, built from this checkout into ``target`` by pip, as ``make install``
    builds it (its build requirements, setuptools and wheel, from the index or pip's cache)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--wheel-dir", str(target), str(ROOT)], check=True, cwd=ROOT, stdin=subprocess.DEVNULL)
    (wheel,) = target.glob("streamsdsl-*.whl")
    return wheel


def jars() -> list[Path]:
    """The JVM operator's jar and Spark's Kafka connector's jars (those Spark lacks)."""
    from streamsdsl.jvm import jar_path
    from streamsdsl.runtime.jvm_connector import connector_jars

    found = connector_jars()
    if not found:
        print("Spark's Kafka connector is not in the cache (run `streamsdsl kafka-connector`): the image will not "
              "have kafka.connector = \"jvm\"", file=sys.stderr)
    return [Path(jar_path()), *(Path(j) for j in found)]


def write_context(context: Path, apps: list[Path], *, offline: bool = False) -> Path:
    """Write the build context into ``context`` (emptied first); see the module's docstring."""
    if context.exists():
        shutil.rmtree(context)
    (context / "wheels").mkdir(parents=True)
    (context / "dist").mkdir()
    shutil.copyfile(DOCKERFILE, context / "Dockerfile")
    needed = requirements()
    (context / "requirements.txt").write_text("".join(f"{d.metadata['Name']}=={d.version}\n" for d in needed))
    build_wheel(context / "dist")
    if offline:
        for dist in needed:
            pack_wheel(dist, context / "wheels")
    (context / "jars").mkdir()
    for jar in jars():
        shutil.copyfile(jar, context / "jars" / jar.name)
    (context / "app").mkdir()
    for app in apps:
        shutil.copyfile(app, context / "app" / app.name)
    return context


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("context", type=Path, help="the directory to write (emptied first)")
    parser.add_argument("--app", type=Path, action="append", default=[], help="an application file (repeatable)")
    parser.add_argument("--offline", action="store_true",
                        help="also a wheel of every requirement, packed from this environment (no index needed)")
    args = parser.parse_args(argv)
    print(write_context(args.context.resolve(), args.app, offline=args.offline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
