#!/bin/sh
# Constructed (issue 35 item 2): the only vLLM line pulls the image; nothing is served.
set -e
docker pull vllm/vllm-openai:v0.33.0
