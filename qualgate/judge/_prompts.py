"""Judge prompt templates (YAML files) and the strict reading of a judge's reply.

A template file::

    name: qualgate-pointwise-v1      # a label, recorded with every verdict
    kind: pointwise                  # pointwise (a rating) | pairwise (A, B or tie)
    rating: {low: 1, high: 10}       # pointwise only: the scale of [[rating]]
    prompts:                         # variants, chosen per item
      single: {system: "...", user: "... {{question}} ... {{answer}} ..."}
      single_reference: {...}        # optional: the item has a reference answer
      multi: {...}                   # optional: the conversation has earlier turns
      multi_reference: {...}         # optional

The variant is ``multi`` when the conversation has more than one user turn, ``single``
otherwise, with ``_reference`` when the item has a reference answer and the file has that
variant (else the reference is not shown). A variant the item needs and the file lacks is a
:class:`~qualgate.errors.DataError`.

Variables (``{{name}}``; single braces are literal text): ``question`` (the last user
message), ``question_1`` .. ``question_n``; pointwise ``answer`` (the output judged) and
``answer_1`` .. ``answer_n`` (earlier assistant turns from the conversation, the output last);
pairwise ``answer_a``, ``answer_b`` and ``answer_a_1`` .. ``answer_b_n`` (the earlier turns
are the conversation's, shared by both); ``reference`` (the last turn's reference answer) and
``reference_1`` .. ``reference_n``. A variable that an item does not have is a DataError
naming the template file.

Verdicts are read strictly (:func:`parse_rating`, :func:`parse_choice`): the reply must
contain exactly one distinct verdict token, ``[[x]]`` with a number on the scale, or
``[[A]]``/``[[B]]``/``[[C]]`` (C: a tie). Anything else (no token, two different tokens, a
rating off the scale, an empty reply) raises :class:`Unreadable`: the record's outcome is
``judge_error``, never a pass.

The template hash (:attr:`Template.sha256`) is the SHA-256 of the canonical JSON of the
file's content (name, kind, scale and every variant), so reformatting the YAML does not
change it and changing one character of a prompt does.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from qualgate.errors import DataError
from qualgate.records import strict as _strict

__all__ = ["BUILTIN", "KINDS", "Template", "Unreadable", "load_template", "parse_choice", "parse_rating"]

KINDS = ("pointwise", "pairwise")
VARIANTS = ("single", "single_reference", "multi", "multi_reference")
#: the shipped templates: name -> file in qualgate/judge/templates/
BUILTIN = {"pointwise": "pointwise.yaml", "pairwise": "pairwise.yaml"}
_TOP = ("name", "kind", "rating", "prompts")
_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_RATING = re.compile(r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]")
_CHOICE = re.compile(r"\[\[\s*([ABC])\s*\]\]")
#: the most characters of a reply kept in a message
_SHOW = 80


class Unreadable(ValueError):
    """A judge reply that holds no verdict the parser can read exactly."""


def _show(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SHOW else "..." + text[-_SHOW:])


def parse_rating(text: str, low: float = 1, high: float = 10) -> float:
    """The one rating ``[[x]]`` in ``text`` (``low <= x <= high``), or :class:`Unreadable`."""
    if not isinstance(text, str) or not text.strip():
        raise Unreadable("empty reply")
    found = {float(m) for m in _RATING.findall(text)}
    if len(found) != 1:
        what = "no [[rating]]" if not found else f"{len(found)} different ratings {sorted(found)}"
        raise Unreadable(f"{what} in the reply {_show(text)}")
    value = found.pop()
    if not low <= value <= high:
        raise Unreadable(f"rating {value:g} is off the scale [{low:g}, {high:g}]")
    return value


def parse_choice(text: str) -> str:
    """``"A"``, ``"B"`` or ``"tie"`` (``[[C]]``): the one verdict token in ``text``."""
    if not isinstance(text, str) or not text.strip():
        raise Unreadable("empty reply")
    found = set(_CHOICE.findall(text))
    if len(found) != 1:
        what = "no [[A]], [[B]] or [[C]]" if not found else f"both {' and '.join(f'[[{c}]]' for c in sorted(found))}"
        raise Unreadable(f"{what} in the reply {_show(text)}")
    choice = found.pop()
    return "tie" if choice == "C" else choice


@dataclass(frozen=True)
class Template:
    """A judge prompt template (see the module docstring)."""

    name: str
    kind: str
    prompts: Mapping[str, Mapping[str, str]]
    low: float = 1
    high: float = 10
    path: str | None = None

    @property
    def sha256(self) -> str:
        doc = {"name": self.name, "kind": self.kind, "prompts": self.prompts}
        if self.kind == "pointwise":
            doc["rating"] = {"low": self.low, "high": self.high}
        return hashlib.sha256(
            json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
        ).hexdigest()

    def variant(self, turns: int, has_reference: bool) -> str:
        base = "multi" if turns > 1 else "single"
        name = f"{base}_reference" if has_reference and f"{base}_reference" in self.prompts else base
        if name not in self.prompts:
            raise DataError(
                f"the item has {turns} user turns and the template has no {base!r} prompt",
                file=self.path,
                field="prompts",
                value=sorted(self.prompts),
            )
        return name

    def render(self, variant: str, variables: Mapping[str, str]) -> list[dict[str, str]]:
        """The chat messages of one judge request."""
        spec = self.prompts[variant]

        def fill(text):
            def one(m):
                key = m.group(1)
                if key not in variables:
                    raise DataError(
                        f"template variable {{{{{key}}}}} is not defined for this item (defined: {sorted(variables)})",
                        file=self.path,
                        field=f"prompts.{variant}",
                        value=key,
                    )
                return variables[key]

            return _VAR.sub(one, text)

        messages = [{"role": "system", "content": fill(spec["system"])}] if spec.get("system") else []
        return messages + [{"role": "user", "content": fill(spec["user"])}]

    def parse(self, text: str):
        """The verdict of a reply: a rating (pointwise) or ``A``/``B``/``tie`` (pairwise)."""
        return parse_rating(text, self.low, self.high) if self.kind == "pointwise" else parse_choice(text)


def _fail(message, path, key=None, value=None):
    raise DataError(message, file=str(path), field=key, value=value)


def load_template(name_or_path: str | Path, *, kind: str | None = None, base: str | Path | None = None) -> Template:
    """A template by built-in name (:data:`BUILTIN`) or YAML path (relative to ``base``).

    ``kind``, when given, must be the template's kind.
    """
    text = str(name_or_path)
    if text in BUILTIN:
        path = resources.files("qualgate.judge").joinpath("templates", BUILTIN[text])
    else:
        path = Path(text)
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        if not path.is_file():
            _fail(f"no such judge template file (built-in templates: {sorted(BUILTIN)})", path)
    doc = _strict.load_yaml(path)
    if not isinstance(doc, dict):
        _fail("a judge template must be a mapping", path)
    for key in doc:
        if key not in _TOP:
            _fail(f"unknown key; valid keys: {list(_TOP)}", path, key)
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        _fail("must be a non-empty string", path, "name", name)
    if doc.get("kind") not in KINDS:
        _fail(f"must be one of {list(KINDS)}", path, "kind", doc.get("kind"))
    if kind is not None and doc["kind"] != kind:
        _fail(f"a {kind} judge needs a {kind} template", path, "kind", doc["kind"])
    low, high = 1, 10
    if doc["kind"] == "pointwise":
        rating = doc.get("rating") or {}
        if not isinstance(rating, dict) or set(rating) - {"low", "high"}:
            _fail("must be a mapping with low and high", path, "rating", rating)
        low, high = rating.get("low", 1), rating.get("high", 10)
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in (low, high)) or not low < high:
            _fail("low and high must be numbers with low < high", path, "rating", rating)
    elif "rating" in doc:
        _fail("only for a pointwise template", path, "rating", doc["rating"])
    prompts = doc.get("prompts")
    if not isinstance(prompts, dict) or "single" not in prompts:
        _fail("must be a mapping of variants with at least 'single'", path, "prompts", prompts)
    for variant, spec in prompts.items():
        if variant not in VARIANTS:
            _fail(f"unknown variant; valid variants: {list(VARIANTS)}", path, f"prompts.{variant}")
        if (
            not isinstance(spec, dict)
            or set(spec) - {"system", "user"}
            or not isinstance(spec.get("user"), str)
            or not spec["user"].strip()
            or not isinstance(spec.get("system", ""), str)
        ):
            _fail(
                "must be a mapping with a non-empty 'user' string and an optional 'system' string",
                path,
                f"prompts.{variant}",
                spec,
            )
    return Template(name.strip(), doc["kind"], {k: dict(v) for k, v in prompts.items()}, low, high, str(path))


def variables(messages: Sequence[Mapping[str, str]], reference, answers: Mapping[str, str]) -> tuple[int, dict]:
    """``(user turns, template variables)`` of a conversation, its reference and the output(s).

    ``answers`` maps a suffix to an output: ``{"": text}`` (pointwise) or
    ``{"_a": text_a, "_b": text_b}`` (pairwise).
    """
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    earlier = [str(m.get("content", "")) for m in messages if m.get("role") == "assistant"]
    if not users:
        raise DataError("a judged item needs at least one user message", field="messages")
    n = len(users)
    out = {"question": users[-1], **{f"question_{i + 1}": u for i, u in enumerate(users)}}
    for suffix, text in answers.items():
        out[f"answer{suffix}"] = text
        for i, e in enumerate(earlier[: n - 1]):
            out[f"answer{suffix}_{i + 1}"] = e
        out[f"answer{suffix}_{n}"] = text
    refs = [reference] if isinstance(reference, str) else list(reference or [])
    refs = [str(r) for r in refs if r is not None and str(r).strip()]
    if refs:
        out["reference"] = refs[-1] if len(refs) < n else refs[n - 1]
        out.update({f"reference_{i + 1}": r for i, r in enumerate(refs)})
    return n, out
