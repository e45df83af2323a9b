"""Benchmark suites: declarative YAML files turned into questions with prompts, gold answers
and a grader.

>>> from qualgate.suites import load_suite, list_suites
>>> suite = load_suite("gsm8k", data_files="gsm8k/test.jsonl")   # doctest: +SKIP
>>> q = suite.questions[0]; q.id, q.gold                        # doctest: +SKIP
('gsm8k/…', '18')
>>> suite.grade(q, "... so she makes $18.\\n#### 18").outcome     # doctest: +SKIP
'correct'

Built-in suites are the YAML files of the top-level ``suites/`` folder (shipped in the wheel
as ``qualgate._suites``); :func:`list_suites` names them. Any other YAML file can be loaded by
path.

Suite file schema
-----------------
Every key is listed here; any other key is an error (:class:`qualgate.errors.DataError`
naming the file, the key and its value). There is no logic in a suite file: extractors,
graders and gold parsers are named functions of :mod:`qualgate.graders`, generators are named
in :data:`GENERATORS`. A *function spec* is either a name or ``{name: NAME, params: {...}}``;
params are checked against the function's signature when the file is read.

.. code-block:: yaml

    name: gsm8k                # [a-z0-9_]+; a built-in suite's name equals its file name
    version: 1                 # int >= 1; bump whenever prompt, extraction or grading changes
    description: "..."         # optional
    source:                    # exactly one of `dataset`, `generator` or `traffic`
      dataset: openai/gsm8k    #   Hub id, loaded with datasets.load_dataset
      config: main             #   optional
      split: test              #   required with `dataset`
      revision: cc7b047b...    #   required with `dataset`: a pinned 40-hex commit
      # generator: demo_arithmetic   # a name in GENERATORS; rows come from a function
      # params: {n: 200, seed: 0}    # its keyword arguments (optional)
      # traffic: requests.jsonl      # chat requests (JSON Lines; a path relative to this
      #                              #   file, or a list): see qualgate.suites._traffic.
      #                              #   No id, fields, prompt or choices then; gold optional
      #                              #   (its field a dotted path, e.g. body.metadata.ref)
      # sample: {n: 500, seed: 0}    # a seeded sample of the distinct requests (optional)
      # sampling: config             # config (default: the config's sampling wins) or
      #                              #   request (each request's own fields win)
      # ignore_fields: [tools]       # request fields to drop knowingly (optional)
    id:                        # how question ids are formed; exactly one of
      field: unique_id         #   a column holding unique ids (read as str), or
      # rule: content_hash     #   prefix + first 16 hex of sha256 of the compact UTF-8
      # fields: [question]     #     JSON list of these columns' values, i.e. of
                               #     json.dumps(values, ensure_ascii=False,
                               #     separators=(",", ":")) (stable under reordering), or
      # rule: row_index        #   prefix + row number (stable only with a pinned source)
      # prefix: "gsm8k/"       #   optional, with a rule
    fields:                    # template variable -> column; every row must have them all
      question: question
    gold:                      # the gold answer (exactly one of `gold` and `choices`)
      field: answer            #   the column
      parse: {name: after_marker, params: {marker: "####"}}   # GOLD_PARSERS; default text
      # fields: {prefix: prompt, test: test, entry_point: entry_point}   # instead of `field`:
      #                        #   several columns, given to the parser as {part: value}
      #                        #   (parse: unit_tests, for grader: unit_tests)
    # choices:                 # multiple choice instead of `gold`: the options are shuffled
    #   correct: Correct Answer                 # per question by
    #   incorrect: [Incorrect Answer 1, ...]    # graders.choice_permutation(id, salt=salt);
    #   salt: gpqa_diamond     # optional (default: the suite name); the gold is the letter
    meta: [subject, level]     # optional columns copied into Question.meta
    prompt:                    # chat messages; {{name}} is replaced by a variable (only
      system: "..."            #   names from `fields`, and with `choices` also {{A}}, {{B}},
      user: "..."              #   ... and {{choices}} = "A) ...\\nB) ..."); `system` optional
    extract:                   # extractors (EXTRACTORS): a spec or a list tried in order;
      strict: {name: after_marker, params: {marker: "####"}}   # the requested format only
      lenient: last_number     # the lenient reading (each list's first answer counts)
    grader: numeric            # GRADERS: (pred, gold) -> bool
    decides: strict            # the decision policy: strict (the strict answer only),
                               #   lenient (the lenient answer only) or either (strict if
                               #   found, else lenient); records name the deciding extractor
                               #   in `decided_by` ("strict:after_marker", "lenient:boxed"):
                               #   its name, or the `label` its spec gives ({name: ...,
                               #   label: final_answer, params: ...}), unique per list
    think: strip               # optional, reasoning blocks (<think>...</think>,
                               #   <|begin_of_thought|>...<|end_of_thought|>): strip (the
                               #   default: grade the text after the block; an output that
                               #   ends inside one is no_answer), prefilled (as strip, and
                               #   the chat template opens the block in the prompt, so an
                               #   output without a closing tag ends inside it), or off
    generation:                # suggested settings for the backend
      max_tokens: 1024         #   required, int >= 1
      temperature: 0.0         #   optional: temperature, top_p, top_k, min_p, stop

A generator (``source.generator``) is resolved through :data:`GENERATORS` (name ->
``"module:function"``); the function takes the YAML ``params`` as keyword arguments and
returns a list of row dicts, which are then read exactly like dataset rows.

For a synthetic integer task with the strict format ``#### N`` (or ``The answer is N``)::

    extract:
      strict: {name: after_marker, params: {marker: "####"}}
      lenient: last_number
    grader: numeric
    gold: {field: answer}

Data loading
------------
By default a dataset suite is loaded from the Hub with ``datasets.load_dataset(dataset,
config, split=split, revision=revision)``. ``data_files`` (a path or a list of paths to
JSONL, JSON, Parquet or CSV files, or gzipped JSONL/JSON: ``.jsonl.gz``) loads a local copy through ``datasets`` instead, for
offline machines. Missing columns, empty data, malformed gold answers and duplicate ids are
:class:`~qualgate.errors.DataError`.
"""

from ._load import Question, Suite, list_suites, load_suite, suite_path
from ._spec import GENERATORS, read_spec

__all__ = ["GENERATORS", "Question", "Suite", "list_suites", "load_suite", "read_spec", "suite_path"]
