# K comes from the checkpoint's num_nextn_predict_layers
vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --speculative-config '{"method": "mtp"}'
