# vLLM 0.33 with ModelRunner V1 forced: FLy runs as v1/spec_decode/fly.py implements it (lint rule runner)
docker run --gpus all -e VLLM_USE_V2_MODEL_RUNNER=0 vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B \
  -sc '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}'
