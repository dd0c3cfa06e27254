"""The build backend of the lockwarden Python package, in its own source tree (PEP 517:
pyproject.toml names it with `build-backend = "lockwarden_build"`, `backend-path = ["_build"]`).

Why it exists: to build a package, pip first installs the backend that pyproject.toml asks for
(setuptools, flit, hatchling...) from an index into an isolated environment. Where no index is
reachable (this project's CI, hosts without internet access) that fails, and so would
`pip install ./clients/python`. This backend is the standard library only, so `requires = []`
and pip installs the package offline, with or without -e.

It knows one layout: pure-Python packages in src/, static metadata in the [project] table of
pyproject.toml (name, version, description, readme, requires-python, dependencies,
classifiers, urls; anything else is refused rather than ignored). It writes only into the
directory pip names, never into the source tree.

Hooks: build_wheel, build_sdist (PEP 517), build_editable (PEP 660: the wheel holds a .pth
file putting src/ on sys.path), and the prepare_metadata_for_build_* hooks.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = "src"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # in every archive: a build depends on the sources only
_FIELDS = ("name", "version", "description", "readme", "requires-python", "dependencies",
           "classifiers", "urls")

Files = List[Tuple[str, bytes]]  # (path in the archive, content)


# pyproject.toml --------------------------------------------------------------------------------

_TOKEN = re.compile(r'''
    (?P<space>[ \t]+) | (?P<comment>\#[^\n]*) | (?P<newline>\r?\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*") | (?P<bare>[A-Za-z0-9_-]+) | (?P<punct>[\[\]{}=,.])
''', re.VERBOSE)


def parse_toml(text: str) -> Dict[str, Any]:
    """The subset of TOML this project's pyproject.toml uses (tomllib is Python 3.11+): [table]
    and [dotted.table] headers, `key = value` with bare or quoted keys, and values that are
    basic strings, arrays of them (across lines) or inline tables of them. Anything else raises
    ValueError."""
    tokens: List[Tuple[str, str]] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError("pyproject.toml: unsupported TOML at %r" % text[at:at + 30])
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append((kind, match.group()))
        at = match.end()
    tokens.append(("newline", "\n"))
    document: Dict[str, Any] = {}
    table = document
    i = 0

    def take(*kinds: str) -> str:
        nonlocal i
        kind, value = tokens[i]
        if kind not in kinds and value not in kinds:
            raise ValueError("pyproject.toml: expected %s, found %r" % ("/".join(kinds), value))
        i += 1
        return value

    def key() -> str:
        token = take("bare", "string")
        return str(json.loads(token)) if token.startswith('"') else token

    def skip_newlines() -> None:
        nonlocal i
        while tokens[i][0] == "newline":
            i += 1

    def value() -> Any:
        if tokens[i][0] == "string":
            return json.loads(take("string"))
        if take("[", "{") == "[":
            items = []
            skip_newlines()
            while tokens[i][1] != "]":
                items.append(value())
                skip_newlines()
                if tokens[i][1] != "]":
                    take(",")
                    skip_newlines()
            take("]")
            return items
        inline: Dict[str, Any] = {}
        while tokens[i][1] != "}":
            name = key()
            take("=")
            inline[name] = value()
            if tokens[i][1] != "}":
                take(",")
        take("}")
        return inline

    while i < len(tokens):
        if tokens[i][0] == "newline":
            i += 1
            continue
        if tokens[i][1] == "[":
            i += 1
            table = document
            while True:
                table = table.setdefault(key(), {})
                if take(".", "]") == "]":
                    break
        else:
            name = key()
            take("=")
            if name in table:
                raise ValueError("pyproject.toml: %r set twice" % name)
            table[name] = value()
        take("newline")
    return document


def _project() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        project: Dict[str, Any] = parse_toml(f.read())["project"]
    unknown = sorted(set(project) - set(_FIELDS))
    if unknown:
        raise ValueError("pyproject.toml: [project] fields this backend does not implement: %s"
                         % ", ".join(unknown))
    return project


def metadata(project: Dict[str, Any]) -> bytes:
    """The core metadata (METADATA in a wheel, PKG-INFO in an sdist), version 2.1."""
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"],
             "Version: " + project["version"]]
    if "description" in project:
        lines.append("Summary: " + project["description"])
    if "requires-python" in project:
        lines.append("Requires-Python: " + project["requires-python"])
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    lines += ["Classifier: " + c for c in project.get("classifiers", [])]
    lines += ["Project-URL: %s, %s" % item for item in project.get("urls", {}).items()]
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: " + (
            "text/markdown" if project["readme"].endswith(".md") else "text/plain"))
        with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return ("\n".join(lines) + "\n" + body).encode()


def _distribution(project: Dict[str, Any]) -> str:
    """The name as in archive names (PEP 427, PEP 625): name_version."""
    return "%s-%s" % (re.sub(r"[-_.]+", "_", project["name"]).lower(), project["version"])


# Archives --------------------------------------------------------------------------------------


def _sources() -> Files:
    """Every file of the packages under src/, compiled files and caches left out."""
    files: Files = []
    top = os.path.join(ROOT, SOURCES)
    for directory, subdirectories, names in os.walk(top):
        subdirectories[:] = sorted(d for d in subdirectories
                                   if d != "__pycache__" and not d.startswith("."))
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                continue
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                files.append((os.path.relpath(path, top).replace(os.sep, "/"), f.read()))
    return files


def _dist_info(project: Dict[str, Any]) -> Files:
    wheel = ("Wheel-Version: 1.0\nGenerator: lockwarden_build (in-tree)\n"
             "Root-Is-Purelib: true\nTag: py3-none-any\n")
    info = _distribution(project) + ".dist-info/"
    return [(info + "METADATA", metadata(project)), (info + "WHEEL", wheel.encode())]


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (path, digest, len(data))


def _write_wheel(directory: str, project: Dict[str, Any], files: Files) -> str:
    """Writes the wheel of `files` plus its .dist-info (METADATA, WHEEL, RECORD)."""
    files = files + _dist_info(project)
    record_path = _distribution(project) + ".dist-info/RECORD"
    record = "".join(_record_line(p, d) for p, d in files) + record_path + ",,\n"
    files.append((record_path, record.encode()))
    name = _distribution(project) + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files:
            entry = zipfile.ZipInfo(path, FIXED_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return name


def _write_metadata_directory(directory: str) -> str:
    project = _project()
    for path, data in _dist_info(project):
        os.makedirs(os.path.join(directory, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(directory, path), "wb") as f:
            f.write(data)
    return _distribution(project) + ".dist-info"


# PEP 517 and PEP 660 hooks ---------------------------------------------------------------------


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, _project(), _sources())


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """A wheel whose only file besides .dist-info is a .pth naming src/ in this tree, so the
    installed package is the source being edited."""
    project = _project()
    pth = (os.path.join(ROOT, SOURCES) + "\n").encode()
    return _write_wheel(wheel_directory, project,
                        [("__editable__.%s.pth" % _distribution(project), pth)])


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _write_metadata_directory(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _write_metadata_directory(metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """name-version.tar.gz: PKG-INFO, pyproject.toml, the readme, this backend and src/ (what
    building a wheel from it needs)."""
    project = _project()
    top = _distribution(project)
    files: Files = [("PKG-INFO", metadata(project))]
    for path in ["pyproject.toml", project.get("readme"), "_build/lockwarden_build.py"]:
        if path:
            with open(os.path.join(ROOT, path), "rb") as f:
                files.append((path, f.read()))
    files += [(SOURCES + "/" + path, data) for path, data in _sources()]
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, data in files:
            entry = tarfile.TarInfo(top + "/" + path)
            entry.size = len(data)
            entry.mode = 0o644
            entry.mtime = 315532800  # 1980-01-01, as FIXED_TIME
            archive.addfile(entry, io.BytesIO(data))
    name = top + ".tar.gz"
    with open(os.path.join(sdist_directory, name), "wb") as out:
        out.write(gzip.compress(tar.getvalue(), mtime=0))
    return name
