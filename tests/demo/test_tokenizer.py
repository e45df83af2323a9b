"""The demo's character-level chat tokenizer."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualgate.demo.task import messages
from qualgate.demo.tokenizer import CHARS, SPECIAL_TOKENS, build_tokenizer

TOK = build_tokenizer()


@settings(max_examples=200)
@given(st.text(alphabet=CHARS, max_size=200))
@pytest.mark.slow
def test_every_character_is_one_token_and_decodes_back(text):
    ids = TOK(text, add_special_tokens=False)["input_ids"]
    assert TOK.decode(ids, skip_special_tokens=False) == text
    if not any(s in text for s in SPECIAL_TOKENS):  # those are one token each
        assert len(ids) == len(text)


def test_special_tokens_come_first_in_id_order():
    assert TOK.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == list(range(len(SPECIAL_TOKENS)))
    assert (TOK.pad_token_id, TOK.unk_token_id, TOK.eos_token_id) == (0, 1, 5)
    assert len(TOK) == len(SPECIAL_TOKENS) + len(CHARS)


def test_special_token_text_is_one_token():
    ids = TOK("<|user|>2<|end|>", add_special_tokens=False)["input_ids"]
    assert TOK.convert_ids_to_tokens(ids) == ["<|user|>", "2", "<|end|>"]


def test_unknown_character_becomes_unk():
    assert TOK("é", add_special_tokens=False)["input_ids"] == [TOK.unk_token_id]


def test_generation_prompt_renders_system_then_user_then_assistant():
    text = TOK.apply_chat_template(messages("What is 3 + 4?"), tokenize=False, add_generation_prompt=True)
    assert text == ("<|system|>End with: The answer is N.<|user|>What is 3 + 4?<|assistant|>")


def test_assistant_turn_ends_with_the_eos_token():
    answer = {"role": "assistant", "content": "3+4=7. The answer is 7."}
    conv = messages("What is 3 + 4?") + [answer]
    ids = TOK.apply_chat_template(conv, return_dict=False)
    assert ids[-1] == TOK.eos_token_id
    prompt = TOK.apply_chat_template(messages("What is 3 + 4?"), add_generation_prompt=True, return_dict=False)
    assert ids[: len(prompt)] == prompt
    assert TOK.decode(ids[len(prompt) : -1]) == "3+4=7. The answer is 7."


def test_unknown_role_is_an_error():
    with pytest.raises(Exception, match="role must be system, user or assistant"):
        TOK.apply_chat_template([{"role": "tool", "content": "x"}], tokenize=False)


def test_batches_pad_on_the_left():
    batch = TOK(["12", "1234"], padding=True)
    assert batch["input_ids"][0][:2] == [TOK.pad_token_id] * 2
    assert batch["attention_mask"][0] == [0, 0, 1, 1]


def test_saved_tokenizer_reloads_with_autotokenizer(tmp_path):
    from transformers import AutoTokenizer

    TOK.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    conv = messages("What is 12 * 3 - 5?")
    assert loaded.apply_chat_template(conv, add_generation_prompt=True, return_dict=False) == TOK.apply_chat_template(
        conv, add_generation_prompt=True, return_dict=False
    )
    assert (loaded.eos_token_id, loaded.pad_token_id, loaded.padding_side) == (5, 0, "left")
    assert loaded.decode(loaded("7*8=56.")["input_ids"]) == "7*8=56."
