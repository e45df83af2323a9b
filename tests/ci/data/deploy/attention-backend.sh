#!/bin/sh
# Constructed (issue 35 item 4): B12X_MLA_SPARSE is not an AttentionBackendEnum member.
vllm serve deepseek-ai/DeepSeek-V3.2 --attention-backend B12X_MLA_SPARSE
