vllm serve Qwen/Qwen3-8B --speculative-config '{"method": "draft_model", "num_speculative_tokens": 8,}'
