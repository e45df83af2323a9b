docker run --gpus all -p 8000:8000 --ipc=host vllm/vllm-openai:v0.33.0 \
  --model Qwen/Qwen3-8B --dtype bfloat16 \
  --speculative-config '{"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2, "fly_entropy_threshold": 0.3}'
