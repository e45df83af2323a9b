vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 \
  --speculative-config '{"model": "meta-llama/Llama-3.1-8B-Instruct", "num_speculative_tokens": 5, "tensor_parallel_size": 1}'
