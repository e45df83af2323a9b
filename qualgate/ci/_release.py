"""Which vLLM release a deployment runs, and whether the evidence was produced on it (issue 45).

The release decides which rules of :mod:`qualgate.vllm033.rules` apply (a key 0.34 removed is
refused on 0.34, one it added is refused on 0.33) and which evidence binds: a gate report's
records name the engine and version that decoded them (``engine``, ``engine_version``), and
evidence from another minor release (another runner, sampler, noise, rules) is no evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from qualgate.vllm033.rules import RELEASES, minor_of
from qualgate.vllm033.serving_config import ServingConfig

from ..errors import DataError

__all__ = ["Release", "deployment_release", "evidence_release_notes"]

_HOW = (
    "state it as an image tag (vllm/vllm-openai:v0.34.0), a pinned requirement (vllm==0.34.0, "
    "uv run --with vllm==0.34.0), a version field of the config, or --vllm-version 0.34.0"
)


@dataclass(frozen=True)
class Release:
    """The vLLM release a deployment runs."""

    version: str  #: as stated (``0.34.0``)
    minor: str  #: ``0.34``: the rules that apply
    source: str  #: where it was read, for messages

    def to_dict(self) -> dict:
        return {"version": self.version, "minor": self.minor, "source": self.source}


def _parse(version: str, source: str, path: str) -> Release:
    try:
        minor = minor_of(version)
    except ValueError:
        raise DataError(
            f"the vLLM version {version!r} ({source}) is not a release number: a tag such as 'latest' "
            f"or 'nightly' names whatever was pushed last, so qualgate cannot tell which rules apply "
            f"nor bind evidence to it; {_HOW}",
            file=path,
            field="vllm_version",
            value=version,
        ) from None
    if minor not in RELEASES:
        raise DataError(
            f"vLLM {version} ({source}): qualgate has rules for vLLM {', '.join(RELEASES)} only; "
            "`python benchmarks/vllm_release_diff.py OLD NEW` prints what a new release changed, "
            "to review before its rules are added",
            file=path,
            field="vllm_version",
            value=version,
        )
    return Release(str(version).strip().removeprefix("v"), minor, source)


def deployment_release(cfg: ServingConfig, vllm_version: str | None = None, *, required: bool = True) -> Release | None:
    """The vLLM release ``cfg`` runs: ``vllm_version`` (``--vllm-version``), else the version
    its files state (:attr:`ServingConfig.vllm_version`).

    Raises :class:`DataError` (exit 3) when neither states one (unless not ``required``: then
    ``None``), when the version is not a release number (``latest``), when qualgate has no
    rules for it, or when the option and the files disagree.
    """
    stated = None
    if cfg.vllm_version is None and cfg.vllm_version_source and vllm_version is None:
        # the files name a vLLM but no one release of it (a 'latest' tag, no tag, an open pin)
        raise DataError(
            f"{cfg.vllm_version_source}: qualgate cannot tell which rules apply nor bind evidence to it; {_HOW}",
            file=cfg.path,
            field="vllm_version",
        )
    if cfg.vllm_version is not None:
        stated = _parse(cfg.vllm_version, cfg.vllm_version_source or "the deployment's files", cfg.path)
    if vllm_version is not None:
        given = _parse(vllm_version, "--vllm-version", cfg.path)
        if stated is not None and stated.version != given.version:
            raise DataError(
                f"--vllm-version {given.version}, but the deployment states vLLM {stated.version} "
                f"({stated.source}): qualgate will not choose between them; correct one",
                file=cfg.path,
                field="vllm_version",
                value=vllm_version,
            )
        return given
    if stated is None and required:
        raise DataError(
            f"qualgate cannot tell which vLLM release {cfg.path} runs, so it cannot apply that "
            f"release's rules nor bind evidence to it; {_HOW}",
            file=cfg.path,
            field="vllm_version",
        )
    return stated


def evidence_release_notes(report, cid: str | None, release: Release, epath: str) -> list[str]:
    """What the report's records say about the engine that produced them, checked against
    ``release``: :class:`DataError` (exit 3) when a side was decoded by vLLM of another minor
    release, or by vLLM of no stated version; notes for what cannot be checked."""
    cand = report.candidate(cid) if cid else None
    sides = [("baseline", report.baseline)] + ([("candidate", cand.side)] if cand is not None else [])
    notes = []
    for label, side in sides:
        engine, version = getattr(side, "engine", None), getattr(side, "engine_version", None)
        if engine is None:
            notes.append(
                f"the {label} records of {epath} do not name the engine that decoded them (written before "
                "qualgate kept engine and engine_version): the vLLM release of the evidence is not checked"
            )
        elif engine != "vllm":
            notes.append(
                f"the {label} records of {epath} were decoded by the {engine} engine ({version}), not by vLLM "
                f"{release.version}"
            )
        elif version is None:
            raise DataError(
                f"the {label} records of {epath} were decoded by vLLM of no stated version, so they cannot "
                f"be evidence for vLLM {release.version} ({release.source})",
                file=epath,
                field=f"{label}.engine_version",
            )
        elif _minor_or_none(version) != release.minor:
            raise DataError(
                f"the {label} records of {epath} were decoded by vLLM {version}, but the deployment runs "
                f"vLLM {release.version} ({release.source}): evidence binds to one minor release (its "
                "rules, model runner and sampling noise differ between releases); gate again on "
                f"{release.minor}",
                file=epath,
                field=f"{label}.engine_version",
                value=version,
            )
    return notes


def _minor_or_none(version: str) -> str | None:
    try:
        return minor_of(version)
    except ValueError:
        return None
