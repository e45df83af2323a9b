vllm serve Qwen/Qwen3-8B --dtype bfloat16 --speculative-config.method eagle3 \
  --speculative-config.model RedHatAI/Qwen3-8B-speculator.eagle3 \
  --speculative-config.num_speculative_tokens 3
