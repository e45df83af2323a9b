#!/usr/bin/env bash
# One draft token: FLy has nothing to defer to.
exec vllm serve Qwen/Qwen3-8B \
  --port 8000 \
  --speculative-config '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 1, "rejection_sample_method": "fly"}'
