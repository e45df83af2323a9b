#!/bin/sh
# Constructed (issue 35 item 3): no method, a Gemma 4 assistant drafter; vLLM 0.33 reads its
# config.json (model_type gemma4_assistant -> gemma4_mtp) and runs mtp.
vllm serve google/gemma-4-31b-it \
  --speculative-config '{"model": "google/gemma-4-31b-it-assistant", "num_speculative_tokens": 4, "rejection_sample_method": "fly", "fly_window_size": 2}'
