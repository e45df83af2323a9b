"""Reading and validating a suite YAML file (the schema is in the package docstring)."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.records.strict import load_yaml

from .. import graders
from ..errors import DataError
from . import _traffic

#: Row generators for synthetic suites: name -> "module:function". The function takes the
#: suite file's ``source.params`` as keyword arguments and returns a list of row dicts.
GENERATORS: dict[str, str] = {
    "demo_arithmetic": "qualgate.demo.task:generate",
}

_TOP = {
    "name",
    "version",
    "description",
    "source",
    "id",
    "fields",
    "gold",
    "choices",
    "meta",
    "prompt",
    "extract",
    "grader",
    "decides",
    "think",
    "generation",
}
_REQUIRED = {"name", "version", "source", "id", "fields", "prompt", "extract", "grader", "decides", "generation"}
_SOURCE = {"dataset", "config", "split", "revision", "generator", "params"} | _traffic.SOURCE_KEYS
#: A traffic suite's questions are its requests: no ids, fields or prompt template to give.
_TRAFFIC_REQUIRED = _REQUIRED - {"id", "fields", "prompt"}
#: The judge grader reads the whole output: it extracts nothing and decides alone.
_JUDGE_UNUSED = {"extract", "decides"}
_NOT_TRAFFIC = ("id", "fields", "prompt", "choices")
_ID = {"field", "rule", "fields", "prefix"}
_ID_RULES = ("content_hash", "row_index")
_GOLD = {"field", "fields", "parse"}
_CHOICES = {"correct", "incorrect", "salt"}
_PROMPT = {"system", "user"}
_EXTRACT = {"strict", "lenient"}
_GENERATION = {"max_tokens", "temperature", "top_p", "top_k", "min_p", "stop"}
_SPEC = {"name", "params"}
_NAME = re.compile(r"[a-z0-9_]+")
_REVISION = re.compile(r"[0-9a-f]{40}")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
LETTERS = "ABCDEFGHIJKLMNOPQRST"


@dataclass(frozen=True)
class SuiteSpec:
    """A validated suite file; functions are already resolved with their params bound."""

    path: str
    name: str
    version: int
    description: str
    source: dict
    id: dict
    fields: dict
    gold: dict | None
    gold_parse: Callable | None
    choices: dict | None
    meta: tuple
    system: str | None
    user: str
    strict: tuple  #: (label, extractor) pairs
    lenient: tuple  #: (label, extractor) pairs
    grader: Callable
    decides: str
    generation: dict
    raw: dict
    think: str = "strip"


class _Reader:
    def __init__(self, path: str):
        self.path = path

    def fail(self, message, key=None, value=None):
        raise DataError(message, file=self.path, field=key, value=value)

    def mapping(self, value, key, allowed, required=()):
        if not isinstance(value, dict):
            self.fail("must be a mapping", key, value)
        for k in value:
            if k not in allowed:
                where = f"{key}.{k}" if key else k
                self.fail(f"unknown key; valid keys: {sorted(allowed)}", where, value[k])
        for k in sorted(required):
            if k not in value:
                self.fail("required key is missing", f"{key}.{k}" if key else k)
        return value

    def string(self, value, key, *, empty=False):
        if not isinstance(value, str) or (not empty and not value.strip()):
            self.fail("must be a non-empty string", key, value)
        return value

    def strings(self, value, key):
        if not isinstance(value, list) or not value:
            self.fail("must be a non-empty list of strings", key, value)
        return tuple(self.string(v, f"{key}[{i}]") for i, v in enumerate(value))

    def function(self, value, key, registry, n_positional, allowed=_SPEC):
        if isinstance(value, str):
            name, params = value, {}
        else:
            spec = self.mapping(value, key, allowed, {"name"})
            if "label" in spec:
                self.string(spec["label"], f"{key}.label")
            name = self.string(spec["name"], f"{key}.name")
            params = spec.get("params") or {}
            if not isinstance(params, dict):
                self.fail("must be a mapping", f"{key}.params", params)
        if name not in registry:
            self.fail(f"unknown function; valid names: {sorted(registry)}", key, name)
        fn = registry[name]
        try:
            inspect.signature(fn).bind(*([None] * n_positional), **params)
        except TypeError as exc:
            self.fail(f"invalid params for {name!r}: {exc}", f"{key}.params", params)
        return functools.partial(fn, **params) if params else fn

    def extractors(self, value, key):
        """(label, extractor) pairs; the label is the spec's ``label``, else the name."""
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail("must name at least one function", key, value)
        out = []
        for i, v in enumerate(items):
            where = f"{key}[{i}]" if isinstance(value, list) else key
            fn = self.function(v, where, graders.EXTRACTORS, 1, _SPEC | {"label"})
            label = v if isinstance(v, str) else v.get("label", v["name"])
            if label in [lab for lab, _ in out]:
                self.fail(f"label {label!r} is used twice; give each a distinct `label`", where, v)
            out.append((label, fn))
        return tuple(out)


def read_spec(path: str | Path) -> SuiteSpec:
    """Read and validate a suite file; raise :class:`DataError` naming file, key and value."""
    path = str(path)
    r = _Reader(path)
    raw = load_yaml(path)  # strict: a regular file, no aliases, no duplicate keys
    traffic = isinstance(raw, dict) and isinstance(raw.get("source"), dict) and "traffic" in raw["source"]
    judged = isinstance(raw, dict) and _judged(raw.get("grader"))  # no extraction (qualgate.judge)
    doc = r.mapping(raw, "", _TOP, (_TRAFFIC_REQUIRED if traffic else _REQUIRED) - (_JUDGE_UNUSED if judged else set()))

    name = r.string(doc["name"], "name")
    if not _NAME.fullmatch(name):
        r.fail("must match [a-z0-9_]+", "name", name)
    version = doc["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        r.fail("must be an integer >= 1", "version", version)
    description = r.string(doc.get("description", ""), "description", empty=True)

    source = r.mapping(doc["source"], "source", _SOURCE)
    if sum(k in source for k in ("dataset", "generator", "traffic")) != 1:
        r.fail("give exactly one of 'dataset', 'generator' and 'traffic'", "source", source)
    for k in [] if traffic else sorted(_traffic.SOURCE_KEYS & set(source)):
        r.fail("only with 'traffic'", f"source.{k}", source[k])
    if traffic:
        _traffic.check_source(r, source)
        for k in _NOT_TRAFFIC:
            if k in doc:
                r.fail(
                    "not with a traffic source: the questions are the requests' own messages, "
                    "their ids the custom_id or the messages' hash",
                    k,
                    doc[k],
                )
    elif "dataset" in source:
        for k in ("generator", "params"):
            if k in source:
                r.fail("only with 'generator'", f"source.{k}", source[k])
        r.mapping(source, "source", _SOURCE, {"dataset", "split", "revision"})
        for k in ("dataset", "split"):
            r.string(source[k], f"source.{k}")
        if "config" in source and source["config"] is not None:
            r.string(source["config"], "source.config")
        if not isinstance(source["revision"], str) or not _REVISION.fullmatch(source["revision"]):
            r.fail("must be a pinned 40-hex commit", "source.revision", source["revision"])
    else:
        for k in ("dataset", "config", "split", "revision"):
            if k in source:
                r.fail("only with 'dataset'", f"source.{k}", source[k])
        if source["generator"] not in GENERATORS:
            r.fail(f"unknown generator; valid names: {sorted(GENERATORS)}", "source.generator", source["generator"])
        if not isinstance(source.get("params", {}), dict):
            r.fail("must be a mapping", "source.params", source["params"])

    id_: dict = {}
    if not traffic:  # a traffic suite's ids: the custom_id, else the messages' hash
        id_ = r.mapping(doc["id"], "id", _ID)
        if ("field" in id_) == ("rule" in id_):
            r.fail("give exactly one of 'field' and 'rule'", "id", id_)
        if "field" in id_:
            r.string(id_["field"], "id.field")
            for k in ("fields", "prefix"):
                if k in id_:
                    r.fail("only with 'rule'", f"id.{k}", id_[k])
        else:
            if id_["rule"] not in _ID_RULES:
                r.fail(f"unknown rule; valid rules: {list(_ID_RULES)}", "id.rule", id_["rule"])
            if id_["rule"] == "content_hash":
                r.strings(id_.get("fields"), "id.fields")
            elif "fields" in id_:
                r.fail("only with rule content_hash", "id.fields", id_["fields"])
            r.string(id_.get("prefix", ""), "id.prefix", empty=True)

    fields: dict = {}
    if not traffic:
        fields = doc["fields"]
        if not isinstance(fields, dict) or not fields:
            r.fail("must map at least one template variable to a column", "fields", fields)
        for var, col in fields.items():
            if not isinstance(var, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                r.fail("template variable names must be identifiers", "fields", var)
            r.string(col, f"fields.{var}")

    if ("gold" in doc) == ("choices" in doc) and not traffic:
        r.fail("give exactly one of 'gold' and 'choices'", "gold")
    gold = gold_parse = choices = None
    variables = set(fields)
    if "gold" in doc:
        gold = r.mapping(doc["gold"], "gold", _GOLD)
        if ("field" in gold) == ("fields" in gold) or (traffic and "fields" in gold):
            r.fail(
                "give exactly one of 'field' (a column) and 'fields' (parser part -> column, "
                "not with a traffic source)",
                "gold",
                gold,
            )
    if gold is not None and "fields" in gold:  # several columns, as a mapping, for the parser
        if not isinstance(gold["fields"], dict) or not gold["fields"]:
            r.fail("must map at least one part to a column", "gold.fields", gold["fields"])
        for part, col in gold["fields"].items():
            r.string(col, f"gold.fields.{part}")
        gold_parse = r.function(gold.get("parse", "text"), "gold.parse", graders.GOLD_PARSERS, 1)
    elif gold is not None:
        if traffic:
            _traffic.check_column(r, gold["field"], "gold.field")
        r.string(gold["field"], "gold.field")
        gold_parse = r.function(gold.get("parse", "text"), "gold.parse", graders.GOLD_PARSERS, 1)
    elif not traffic:
        choices = r.mapping(doc["choices"], "choices", _CHOICES, {"correct", "incorrect"})
        r.string(choices["correct"], "choices.correct")
        incorrect = r.strings(choices["incorrect"], "choices.incorrect")
        if len(incorrect) + 1 > len(LETTERS):
            r.fail(f"at most {len(LETTERS)} options", "choices.incorrect", choices["incorrect"])
        r.string(choices.get("salt", name), "choices.salt")
        variables |= set(LETTERS[: len(incorrect) + 1]) | {"choices"}

    meta = doc.get("meta", [])
    meta = r.strings(meta, "meta") if meta else ()
    if traffic:
        for i, column in enumerate(meta):
            _traffic.check_column(r, column, f"meta[{i}]")

    user, system = "", None
    if not traffic:
        prompt = r.mapping(doc["prompt"], "prompt", _PROMPT, {"user"})
        user = r.string(prompt["user"], "prompt.user")
        system = prompt.get("system")
        if system is not None:
            r.string(system, "prompt.system")
        for key, template in (("prompt.system", system), ("prompt.user", user)):
            for var in PLACEHOLDER.findall(template or ""):
                if var not in variables:
                    r.fail(f"unknown template variable; known: {sorted(variables)}", key, var)

    if judged:  # a judge model rates the whole output (qualgate.judge._pointwise)
        from qualgate.judge import make_grader

        strict = lenient = ()
        spec = doc["grader"] if isinstance(doc["grader"], dict) else {"name": "judge"}
        r.mapping(spec, "grader", _SPEC, {"name"})
        grader = make_grader(spec.get("params") or {}, path)
        doc.setdefault("decides", "strict")
    else:
        extract = r.mapping(doc["extract"], "extract", _EXTRACT, _EXTRACT)
        strict = r.extractors(extract["strict"], "extract.strict")
        lenient = r.extractors(extract["lenient"], "extract.lenient")
        grader = r.function(doc["grader"], "grader", graders.GRADERS, 2)
    if getattr(grader, "func", grader) is graders.unit_tests:  # its limits and gold, checked now
        try:
            graders.Limits(**getattr(grader, "keywords", {}))
        except ValueError as exc:
            r.fail(str(exc), "grader.params", doc["grader"].get("params"))
        if getattr(gold_parse, "func", gold_parse) is not graders.unit_tests_gold:
            r.fail(
                "the unit_tests grader needs its tests as the gold: "
                "gold: {fields: {prefix: ..., test: ..., entry_point: ...}, parse: unit_tests}",
                "gold",
                doc.get("gold"),
            )
    if traffic and gold is None and not _traffic.grades_without_gold(grader):
        r.fail(
            "needs a gold answer: give gold: {field: COLUMN} (a column of the traffic lines), "
            "or name a grader that grades without one",
            "grader",
            doc["grader"],
        )
    if doc["decides"] not in graders.DECISIONS:
        r.fail(f"must be one of {list(graders.DECISIONS)}", "decides", doc["decides"])
    think = doc.get("think", "strip")
    if think not in graders.THINKING:
        r.fail(f"must be one of {list(graders.THINKING)}", "think", think)

    generation = r.mapping(doc["generation"], "generation", _GENERATION, {"max_tokens"})
    mt = generation["max_tokens"]
    if isinstance(mt, bool) or not isinstance(mt, int) or mt < 1:
        r.fail("must be an integer >= 1", "generation.max_tokens", mt)

    return SuiteSpec(
        path=path,
        name=name,
        version=version,
        description=description.strip(),
        source=dict(source),
        id=dict(id_),
        fields=dict(fields),
        gold=gold,
        gold_parse=gold_parse,
        choices=choices,
        meta=meta,
        system=system,
        user=user,
        strict=strict,
        lenient=lenient,
        grader=grader,
        decides=doc["decides"],
        generation=dict(generation),
        raw=doc,
        think=think,
    )


def _judged(grader) -> bool:
    """Whether a suite's ``grader`` is the judge grader (``judge`` or ``{name: judge, ...}``)."""
    return grader == "judge" or (isinstance(grader, dict) and grader.get("name") == "judge")


def render(template: str, variables: dict[str, Any]) -> str:
    """Replace each ``{{name}}`` by ``variables[name]`` (single braces are literal text)."""
    return PLACEHOLDER.sub(lambda m: variables[m.group(1)], template)
