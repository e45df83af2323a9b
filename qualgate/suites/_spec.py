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
from qualgate.records.yaml_schema import Choice, Field, Int, ListOf, Mapping, Str, Where

from .. import graders
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


def _keys(allowed, required=(), message="must be a mapping") -> Mapping:
    """A mapping of the ``allowed`` keys (``required`` ones missing refused, in sorted order)."""
    return Mapping({k: Field(required=k in required) for k in sorted(allowed)}, message=message)


_STRINGS = ListOf(Str(), empty=False, message="must be a non-empty list of strings")
_POSITIVE = Int(min=1)
_REVISION_SPEC = Str(empty=True, pattern=_REVISION.pattern, message="must be a pinned 40-hex commit")
_FIELDS = Mapping(
    keys=Str(pattern="[A-Za-z_][A-Za-z0-9_]*", message="template variable names must be identifiers"),
    values=Str(),
    empty=False,
    message="must map at least one template variable to a column",
)
_GOLD_FIELDS = Mapping(values=Str(), empty=False, message="must map at least one part to a column")
_PARAMS = Mapping(other=True)  #: keyword arguments, checked by binding them


def _only(mapping: dict, keys, message: str, where: Where) -> None:
    """Refuse each of ``keys`` present in ``mapping`` (a key that another key's choice excludes)."""
    for k in keys:
        if k in mapping:
            where.at(k).fail(message, mapping[k])


def _function(value, where: Where, registry, n_positional, allowed=_SPEC):
    """A named function of ``registry``, its ``params`` bound: ``name`` or ``{name, params}``."""
    if isinstance(value, str):
        name, params = value, {}
    else:
        spec = _keys(allowed, {"name"}).check(value, where)
        if "label" in spec:
            Str().check(spec["label"], where.at("label"))
        name = Str().check(spec["name"], where.at("name"))
        params = _PARAMS.check(spec.get("params") or {}, where.at("params"))
    if name not in registry:
        where.fail(f"unknown function; valid names: {sorted(registry)}", name)
    fn = registry[name]
    try:
        inspect.signature(fn).bind(*([None] * n_positional), **params)
    except TypeError as exc:
        where.at("params").fail(f"invalid params for {name!r}: {exc}", params)
    return functools.partial(fn, **params) if params else fn


def _extractors(value, where: Where):
    """(label, extractor) pairs; the label is the spec's ``label``, else the name."""
    items = value if isinstance(value, list) else [value]
    if not items:
        where.fail("must name at least one function", value)
    out = []
    for i, v in enumerate(items):
        at = where.at(i) if isinstance(value, list) else where
        fn = _function(v, at, graders.EXTRACTORS, 1, _SPEC | {"label"})
        label = v if isinstance(v, str) else v.get("label", v["name"])
        if label in [lab for lab, _ in out]:
            at.fail(f"label {label!r} is used twice; give each a distinct `label`", v)
        out.append((label, fn))
    return tuple(out)


def read_spec(path: str | Path) -> SuiteSpec:
    """Read and validate a suite file; raise :class:`DataError` naming file, key and value."""
    path = str(path)
    at = Where(path)
    raw = load_yaml(path)  # strict: a regular file, no aliases, no duplicate keys
    traffic = isinstance(raw, dict) and isinstance(raw.get("source"), dict) and "traffic" in raw["source"]
    judged = isinstance(raw, dict) and _judged(raw.get("grader"))  # no extraction (qualgate.judge)
    required = (_TRAFFIC_REQUIRED if traffic else _REQUIRED) - (_JUDGE_UNUSED if judged else set())
    _keys(_TOP, required, "a suite file must be a mapping").check(raw, at)
    doc = raw  # the document as written (the spec's ``raw``), its keys checked

    name = Str(pattern=_NAME.pattern).check(doc["name"], at.at("name"))
    version = _POSITIVE.check(doc["version"], at.at("version"))
    description = Str(empty=True).check(doc.get("description", ""), at.at("description"))
    source = _source(doc, traffic, at)
    id_ = {} if traffic else _id(doc["id"], at.at("id"))  # traffic: the custom_id, else the messages' hash
    fields = {} if traffic else _FIELDS.check(doc["fields"], at.at("fields"))
    gold, gold_parse, choices, variables = _answers(doc, name, set(fields), traffic, at)

    meta = doc.get("meta", [])
    meta = tuple(_STRINGS.check(meta, at.at("meta"))) if meta else ()
    if traffic:
        for i, column in enumerate(meta):
            _traffic.check_column(at.at("meta").at(i), column)

    user, system = ("", None) if traffic else _prompt(doc["prompt"], variables, at.at("prompt"))
    strict, lenient, grader = _grading(doc, gold, gold_parse, traffic, judged, at)
    decides = Choice(graders.DECISIONS).check(doc["decides"], at.at("decides"))
    think = Choice(graders.THINKING).check(doc.get("think", "strip"), at.at("think"))
    generation = _keys(_GENERATION, {"max_tokens"}).check(doc["generation"], at.at("generation"))
    _POSITIVE.check(generation["max_tokens"], at.at("generation.max_tokens"))

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
        decides=decides,
        generation=dict(generation),
        raw=doc,
        think=think,
    )


def _source(doc: dict, traffic: bool, at: Where) -> dict:
    """The ``source`` block: exactly one of a pinned dataset, a generator and traffic files."""
    where = at.at("source")
    source = _keys(_SOURCE).check(doc["source"], where)
    if sum(k in source for k in ("dataset", "generator", "traffic")) != 1:
        where.fail("give exactly one of 'dataset', 'generator' and 'traffic'", source)
    if traffic:
        _traffic.check_source(where, source)
        _only(
            doc,
            _NOT_TRAFFIC,
            "not with a traffic source: the questions are the requests' own messages, "
            "their ids the custom_id or the messages' hash",
            at,
        )
        return source
    _only(source, sorted(_traffic.SOURCE_KEYS), "only with 'traffic'", where)
    if "dataset" in source:
        _only(source, ("generator", "params"), "only with 'generator'", where)
        _keys(_SOURCE, {"dataset", "split", "revision"}).check(source, where)
        for k in ("dataset", "split"):
            Str().check(source[k], where.at(k))
        if source.get("config") is not None:
            Str().check(source["config"], where.at("config"))
        _REVISION_SPEC.check(source["revision"], where.at("revision"))
    else:
        _only(source, ("dataset", "config", "split", "revision"), "only with 'dataset'", where)
        generators = Choice(tuple(GENERATORS), message=f"unknown generator; valid names: {sorted(GENERATORS)}")
        generators.check(source["generator"], where.at("generator"))
        _PARAMS.check(source.get("params", {}), where.at("params"))
    return source


def _id(value, where: Where) -> dict:
    """The ``id`` block: a column (``field``) or a rule (``content_hash`` of ``fields``, ``row_index``)."""
    id_ = _keys(_ID).check(value, where)
    if ("field" in id_) == ("rule" in id_):
        where.fail("give exactly one of 'field' and 'rule'", id_)
    if "field" in id_:
        Str().check(id_["field"], where.at("field"))
        _only(id_, ("fields", "prefix"), "only with 'rule'", where)
        return id_
    Choice(_ID_RULES, message=f"unknown rule; valid rules: {list(_ID_RULES)}").check(id_["rule"], where.at("rule"))
    if id_["rule"] == "content_hash":
        _STRINGS.check(id_.get("fields"), where.at("fields"))
    else:
        _only(id_, ("fields",), "only with rule content_hash", where)
    Str(empty=True).check(id_.get("prefix", ""), where.at("prefix"))
    return id_


def _answers(doc: dict, name: str, variables: set, traffic: bool, at: Where):
    """``(gold, gold_parse, choices, variables)``: the gold answer or the multiple choices, and
    the template variables they add."""
    if ("gold" in doc) == ("choices" in doc) and not traffic:
        at.at("gold").fail("give exactly one of 'gold' and 'choices'")
    if "gold" in doc:
        where = at.at("gold")
        gold = _keys(_GOLD).check(doc["gold"], where)
        if ("field" in gold) == ("fields" in gold) or (traffic and "fields" in gold):
            where.fail(
                "give exactly one of 'field' (a column) and 'fields' (parser part -> column, "
                "not with a traffic source)",
                gold,
            )
        if "fields" in gold:  # several columns, as a mapping, for the parser
            _GOLD_FIELDS.check(gold["fields"], where.at("fields"))
        else:
            if traffic:
                _traffic.check_column(where.at("field"), gold["field"])
            Str().check(gold["field"], where.at("field"))
        parse = _function(gold.get("parse", "text"), where.at("parse"), graders.GOLD_PARSERS, 1)
        return gold, parse, None, variables
    if traffic:
        return None, None, None, variables
    where = at.at("choices")
    choices = _keys(_CHOICES, {"correct", "incorrect"}).check(doc["choices"], where)
    Str().check(choices["correct"], where.at("correct"))
    incorrect = _STRINGS.check(choices["incorrect"], where.at("incorrect"))
    if len(incorrect) + 1 > len(LETTERS):
        where.at("incorrect").fail(f"at most {len(LETTERS)} options", choices["incorrect"])
    Str().check(choices.get("salt", name), where.at("salt"))
    return None, None, choices, variables | set(LETTERS[: len(incorrect) + 1]) | {"choices"}


def _prompt(value, variables: set, where: Where) -> tuple[str, str | None]:
    """``(user, system)`` templates, each naming only known variables."""
    prompt = _keys(_PROMPT, {"user"}).check(value, where)
    user = Str().check(prompt["user"], where.at("user"))
    system = prompt.get("system")
    if system is not None:
        Str().check(system, where.at("system"))
    for key, template in (("system", system), ("user", user)):
        for var in PLACEHOLDER.findall(template or ""):
            if var not in variables:
                where.at(key).fail(f"unknown template variable; known: {sorted(variables)}", var)
    return user, system


def _grading(doc: dict, gold, gold_parse, traffic: bool, judged: bool, at: Where):
    """``(strict, lenient, grader)``: the extractors and the grader, checked against the gold."""
    if judged:  # a judge model rates the whole output (qualgate.judge._pointwise)
        from qualgate.judge import make_grader

        spec = doc["grader"] if isinstance(doc["grader"], dict) else {"name": "judge"}
        _keys(_SPEC, {"name"}).check(spec, at.at("grader"))
        grader = make_grader(spec.get("params") or {}, at.file)
        doc.setdefault("decides", "strict")
        strict = lenient = ()
    else:
        extract = _keys(_EXTRACT, _EXTRACT).check(doc["extract"], at.at("extract"))
        strict = _extractors(extract["strict"], at.at("extract.strict"))
        lenient = _extractors(extract["lenient"], at.at("extract.lenient"))
        grader = _function(doc["grader"], at.at("grader"), graders.GRADERS, 2)
    if getattr(grader, "func", grader) is graders.unit_tests:  # its limits and gold, checked now
        try:
            graders.Limits(**getattr(grader, "keywords", {}))
        except ValueError as exc:
            at.at("grader.params").fail(str(exc), doc["grader"].get("params"))
        if getattr(gold_parse, "func", gold_parse) is not graders.unit_tests_gold:
            at.at("gold").fail(
                "the unit_tests grader needs its tests as the gold: "
                "gold: {fields: {prefix: ..., test: ..., entry_point: ...}, parse: unit_tests}",
                doc.get("gold"),
            )
    if traffic and gold is None and not _traffic.grades_without_gold(grader):
        at.at("grader").fail(
            "needs a gold answer: give gold: {field: COLUMN} (a column of the traffic lines), "
            "or name a grader that grades without one",
            doc["grader"],
        )
    return strict, lenient, grader


def _judged(grader) -> bool:
    """Whether a suite's ``grader`` is the judge grader (``judge`` or ``{name: judge, ...}``)."""
    return grader == "judge" or (isinstance(grader, dict) and grader.get("name") == "judge")


def render(template: str, variables: dict[str, Any]) -> str:
    """Replace each ``{{name}}`` by ``variables[name]`` (single braces are literal text)."""
    return PLACEHOLDER.sub(lambda m: variables[m.group(1)], template)
