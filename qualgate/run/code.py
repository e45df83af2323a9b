"""Which code is running: the package's version and a content hash of its source.

The package version (``0.1.0``) is the same at every commit, and a run's ``git`` field is the
revision of the *plan file's* repository, so neither tells two versions of qualgate apart.
:func:`code_identity` does: it hashes every Python source file of the imported package (its
path inside the package and its bytes), so two installs that could decode or grade
differently have different identities, whatever their version string, install method (wheel,
editable, a container image) or checkout.

A run records it in its manifest (:func:`qualgate.run.runner.environment`), each shard and each
resume of a run, and each Ray actor reports its own (:mod:`qualgate.run.ray_backend`);
``qualgate merge`` and ``qualgate run --resume`` refuse records of mixed code
(:func:`compare`), and the gate report names the code that wrote the records.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["code_identity", "compare"]

#: what :func:`code_identity` hashes, for the manifest (a reader can tell how it was computed)
CODE_HASH = "sha256 over sorted 'relative/path.py\\0sha256(bytes)\\n' of every *.py file of the qualgate package"


@functools.lru_cache(maxsize=1)
def _files() -> dict[str, str]:
    root = Path(__file__).resolve().parent.parent  # the qualgate package
    out = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def code_identity(*, files: bool = True) -> dict[str, Any]:
    """The identity of the qualgate code running in this process.

    ``version`` is the installed distribution's version, ``source_sha256`` the content hash of
    the package's Python source (:data:`CODE_HASH`) and ``files`` (unless ``files=False``) each
    file's own hash, so that a refusal can name the files that differ.

    >>> a = code_identity()
    >>> a == code_identity() and len(a["source_sha256"]) == 64
    True
    >>> "run/code.py" in a["files"]
    True
    """
    digests = _files()
    h = hashlib.sha256()
    for rel, digest in digests.items():
        h.update(f"{rel}\0{digest}\n".encode())
    try:
        version = metadata.version("qualgate")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        version = None
    out: dict[str, Any] = {"version": version, "source_sha256": h.hexdigest(), "hash": CODE_HASH}
    if files:
        out["files"] = {rel: d[:16] for rel, d in digests.items()}
    return out


def short(identity: dict[str, Any] | None) -> str:
    """``0.1.0 (source 1a2b3c4d5e6f)``, or ``unknown`` for a missing identity.

    >>> short({"version": "0.1.0", "source_sha256": "1a2b3c4d5e6f7a8b9c"})
    '0.1.0 (source 1a2b3c4d5e6f)'
    >>> short(None)
    'unknown (written before qualgate recorded its code)'
    """
    if not identity or not identity.get("source_sha256"):
        return "unknown (written before qualgate recorded its code)"
    return f"{identity.get('version')} (source {str(identity['source_sha256'])[:12]})"


def compare(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str | None:
    """``None`` when ``a`` and ``b`` are the same code, else what differs, in words: the
    versions, the source hashes and up to five of the files that differ.

    An identity that is missing (a manifest written before qualgate recorded one) never
    matches: whether its code was the same cannot be known.

    >>> a = {"version": "0.1.0", "source_sha256": "aa", "files": {"x.py": "1", "y.py": "2"}}
    >>> compare(a, dict(a)) is None
    True
    >>> compare(a, {"version": "0.1.0", "source_sha256": "bb", "files": {"x.py": "1", "y.py": "3"}})
    'source aa -> bb (files that differ: y.py)'
    >>> compare(None, a)
    'code unknown (written before qualgate recorded its code) -> 0.1.0 (source aa)'
    """
    if not a or not b or not a.get("source_sha256") or not b.get("source_sha256"):
        return f"code {short(a)} -> {short(b)}"
    if a["source_sha256"] == b["source_sha256"]:
        return None
    said = []
    if a.get("version") != b.get("version"):
        said.append(f"version {a.get('version')} -> {b.get('version')}")
    said.append(f"source {str(a['source_sha256'])[:12]} -> {str(b['source_sha256'])[:12]}")
    fa, fb = a.get("files") or {}, b.get("files") or {}
    if fa and fb:
        changed = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
        if changed:
            more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
            said[-1] += f" (files that differ: {', '.join(changed[:5])}{more})"
    return "; ".join(said)
