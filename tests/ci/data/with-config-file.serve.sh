vllm serve Qwen/Qwen3-8B --config vllm-config.yaml
