#!/bin/sh
# Constructed (issue 35 item 7): --served-model-name takes several names (nargs="+").
vllm serve Qwen/Qwen3-8B --served-model-name qwen3 qwen3-8b --max-model-len 8192
