#!/bin/sh
# Constructed (issue 35 item 6): vLLM refuses prompt_lookup_min > prompt_lookup_max.
vllm serve Qwen/Qwen3-8B -sc '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 2}'
