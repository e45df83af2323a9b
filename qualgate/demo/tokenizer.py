"""A character-level tokenizer for the demo models, as a real ``PreTrainedTokenizerFast``.

Every printable ASCII character is one token; the chat roles and the end of a turn are
special tokens, so that a conversation renders through ``apply_chat_template`` like any
Hugging Face chat model's::

    <|system|>End with: ...<|user|>What is 3 + 4?<|assistant|>3+4=7. The answer is 7.<|end|>

``<|end|>`` is the end-of-sequence token (generation stops on it) and ``<pad>`` pads batches
on the left, as generation needs.
"""

from __future__ import annotations

import string

__all__ = ["CHARS", "CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tokenizer"]

#: Special tokens, in id order from 0.
SPECIAL_TOKENS = ("<pad>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>")
#: Ordinary tokens: one per character, ids following the special tokens.
CHARS = string.digits + string.ascii_letters + string.punctuation + " \n"

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{ raise_exception('role must be system, user or assistant, got ' + message['role']) }}"
    "{%- endif -%}"
    "{{ '<|' + message['role'] + '|>' + message['content'] }}"
    "{%- if message['role'] == 'assistant' %}{{ '<|end|>' }}{% endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}{{ '<|assistant|>' }}{% endif -%}"
)


def build_tokenizer():
    """Build the demo tokenizer (no files, no network).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``pad_token`` ``<pad>``, ``eos_token`` ``<|end|>``, ``unk_token`` ``<unk>``,
        left padding and :data:`CHAT_TEMPLATE`.

    Examples
    --------
    >>> tok = build_tokenizer()
    >>> ids = tok("12+3")["input_ids"]
    >>> len(ids), tok.decode(ids)
    (4, '12+3')
    """
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + tuple(CHARS))}
    # BPE without merges splits text into single characters; Fuse joins them back.
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.decoder = decoders.Fuse()
    core.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<|end|>",
        additional_special_tokens=list(SPECIAL_TOKENS[2:5]),
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=256,
        clean_up_tokenization_spaces=False,
    )
