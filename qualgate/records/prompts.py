"""The prompt hash: which prompt a record answered, as a stable public function.

Every record carries ``prompt_hash`` so that a gate can refuse to pair two runs that did not
ask the same question. The hash is defined here, once, for every writer (qualgate's own runs,
the importers of other tools' logs, and any tool that writes records itself):

- a **chat prompt** (a sequence of ``{"role": ..., "content": ...}`` messages, as qualgate's
  suites render them) hashes as the SHA-256 hex digest of its canonical JSON: the list of
  messages with sorted keys, no spaces, non-ASCII characters kept, UTF-8 encoded;
- a **text prompt** (a ``str``: the exact string a tool sent to the model, e.g. lm-eval's
  rendered context with the chat template applied) hashes as the SHA-256 hex digest of its
  UTF-8 bytes, unchanged (no normalisation of whitespace or line ends).

A chat prompt and the text it renders to under a chat template therefore hash differently:
to pair a qualgate run with another tool's run of the same questions, pair by question id and
report prompt differences (``qualgate gate --prompt-mismatch report``) rather than requiring
equal hashes. ``qualgate prompt-hash`` prints the hash of a prompt given on the command line.

Examples
--------
>>> prompt_hash([{"role": "user", "content": "What is 2 + 2?"}])[:16]
'0d878483b4ea7833'
>>> prompt_hash("What is 2 + 2?")[:16]
'38d46ad3618826cf'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

__all__ = ["prompt_hash"]


def prompt_hash(prompt: str | Sequence[Mapping[str, str]]) -> str:
    """SHA-256 hex digest of a prompt: a rendered text, or chat messages (canonical JSON).

    Parameters
    ----------
    prompt : str or sequence of mapping
        The exact text sent to the model, or the chat messages (each a mapping with ``role``
        and ``content``; other keys are hashed too).

    Raises
    ------
    TypeError
        For anything else (bytes, a single mapping, numbers).
    """
    if isinstance(prompt, str):
        data = prompt
    elif isinstance(prompt, Sequence) and all(isinstance(m, Mapping) for m in prompt):
        data = json.dumps([dict(m) for m in prompt], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    else:
        raise TypeError(f"prompt must be a str or a sequence of message mappings, got {type(prompt).__name__}")
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
