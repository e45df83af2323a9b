#!/bin/sh
# Constructed (issue 35 item 5): vLLM opens serve.yaml inside the container, where the mount puts
# configs/fly.yaml; the host's serve.yaml next to this script is lossless.
docker run --gpus all -p 8000:8000 \
  -v ./configs/fly.yaml:/app/serve.yaml:ro -w /app \
  vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B --config serve.yaml
