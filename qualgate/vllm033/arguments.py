"""vLLM 0.33's engine and server arguments, each classed by what it can do to an output.

Every destination that ``vllm serve`` registers (``EngineArgs.add_cli_args`` and
``AsyncEngineArgs.add_cli_args`` in ``engine/arg_utils.py``, ``BaseFrontendArgs``,
``FrontendArgs`` and ``make_arg_parser`` in ``entrypoints/common/cli_args.py`` of the
``vllm-0.33.0`` wheel) is one row of :data:`ARGUMENTS`: its option strings, the line that
registers it, and one of three classes:

- ``output`` (output-changing): what the model computes or how its text is made and returned:
  the weights and their revision, the model code, dtype and quantization, the KV-cache
  dtype, the tokenizer and chat template, the context length, generation defaults, LoRA,
  parsers, kernels and backends that choose a different arithmetic. Each one given is part of
  the config id (:func:`identity_arguments`), so evidence binds to its exact value.
- ``transport``: where and how the same computation is served: network, TLS, logging and
  metrics, the parallel layout, memory, scheduling and batching, loading. They do not enter
  the id. (Like any batch, they can change the order of floating-point reductions; the gate's
  evidence is over that noise, as a deployment's is.) The engine ``seed`` is one: it picks
  which sample an unseeded request draws, not the distribution, and the harness seeds every
  request.
- ``unknown``: not classed (new, experimental or whose effect qualgate has not established).
  ``qualgate check`` refuses a lossy config that sets one (fail closed), as it refuses an
  option that vLLM 0.33 does not register.

``tests/vllm033/test_arguments.py`` extracts the destinations from the wheel
(``VLLM033_SRC``) and checks that this table holds exactly them, with the same options and
lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ARGUMENTS", "CLASSES", "Argument", "dest_of", "identity_arguments"]

CLASSES = ("output", "transport", "unknown")
#: read apart: the model, the speculative config (:mod:`qualgate.vllm033.speculative`) and the
#: ``--config`` file (its options are read as arguments)
SEPARATE = frozenset({"model", "model_tag", "speculative_config", "spec_method", "spec_model", "spec_tokens", "config"})


@dataclass(frozen=True)
class Argument:
    """One destination of vLLM 0.33's ``vllm serve`` parser."""

    dest: str
    klass: str  #: output | transport | unknown
    cite: str  #: the file:line of the wheel that registers it
    options: tuple[str, ...]


#: dest, class, where it is registered, option strings (generated from the wheel, classed by hand)
_TABLE = """\
additional_config                       output     engine/arg_utils.py:1899              --additional-config
aggregate_engine_logging                transport  engine/arg_utils.py:1925              --aggregate-engine-logging
all2all_backend                         transport  engine/arg_utils.py:1317              --all2all-backend
allow_credentials                       transport  entrypoints/common/cli_args.py:327    --allow-credentials
allow_deprecated_quantization           output     engine/arg_utils.py:996               --allow-deprecated-quantization
allowed_headers                         transport  entrypoints/common/cli_args.py:333    --allowed-headers
allowed_local_media_path                transport  engine/arg_utils.py:980               --allowed-local-media-path
allowed_media_domains                   transport  engine/arg_utils.py:983               --allowed-media-domains
allowed_methods                         transport  entrypoints/common/cli_args.py:331    --allowed-methods
allowed_origins                         transport  entrypoints/common/cli_args.py:329    --allowed-origins
anthropic_disabled_thinking_effort      output     entrypoints/common/cli_args.py:201    --anthropic-disabled-thinking-effort
api_key                                 transport  entrypoints/common/cli_args.py:335    --api-key
api_server_count                        transport  entrypoints/common/cli_args.py:451    --api-server-count -asc
async_scheduling                        transport  engine/arg_utils.py:1810              --async-scheduling
attention_backend                       output     engine/arg_utils.py:1113              --attention-backend
attention_config                        output     engine/arg_utils.py:1893              --attention-config -ac
aux_output_config                       unknown    engine/arg_utils.py:1905              --aux-output-config
block_size                              transport  engine/arg_utils.py:1387              --block-size
chat_template                           output     entrypoints/common/cli_args.py:86     --chat-template
chat_template_content_format            output     entrypoints/common/cli_args.py:89     --chat-template-content-format
code_revision                           output     engine/arg_utils.py:987               --code-revision
cohere_format                           output     entrypoints/common/cli_args.py:191    --cohere-format
cohere_is_reasoning_model               output     entrypoints/common/cli_args.py:182    --cohere-is-reasoning-model
collect_detailed_traces                 transport  engine/arg_utils.py:1689              --collect-detailed-traces
compilation_config                      output     engine/arg_utils.py:1890              --compilation-config -cc
config                                  transport  entrypoints/common/cli_args.py:459    --config
config_format                           unknown    engine/arg_utils.py:1033              --config-format
convert                                 output     engine/arg_utils.py:971               --convert
cp_kv_cache_interleave_size             unknown    engine/arg_utils.py:1228              --cp-kv-cache-interleave-size
cpu_distributed_timeout_seconds         transport  engine/arg_utils.py:1183              --cpu-distributed-timeout-seconds
cpu_offload_gb                          transport  engine/arg_utils.py:1470              --cpu-offload-gb
cpu_offload_params                      unknown    engine/arg_utils.py:1471              --cpu-offload-params
cudagraph_capture_sizes                 transport  engine/arg_utils.py:1823              --cudagraph-capture-sizes
cudagraph_metrics                       transport  engine/arg_utils.py:1708              --cudagraph-metrics
custom_histogram_buckets                transport  engine/arg_utils.py:1704              --custom-histogram-buckets
data_parallel_address                   transport  engine/arg_utils.py:1264              --data-parallel-address -dpa
data_parallel_backend                   transport  engine/arg_utils.py:1277              --data-parallel-backend -dpb
data_parallel_external_lb               transport  engine/arg_utils.py:1289              --data-parallel-external-lb -dpe
data_parallel_hybrid_lb                 transport  engine/arg_utils.py:1284              --data-parallel-hybrid-lb -dph
data_parallel_multi_port_external_lb    transport  engine/arg_utils.py:1294              --data-parallel-multi-port-external-lb -dpm
data_parallel_rank                      transport  engine/arg_utils.py:1243              --data-parallel-rank -dpn
data_parallel_rpc_port                  transport  engine/arg_utils.py:1270              --data-parallel-rpc-port -dpp
data_parallel_size                      transport  engine/arg_utils.py:1240              --data-parallel-size -dp
data_parallel_size_local                transport  engine/arg_utils.py:1258              --data-parallel-size-local -dpl
data_parallel_start_rank                transport  engine/arg_utils.py:1252              --data-parallel-start-rank -dpr
data_parallel_supervisor_port           transport  entrypoints/common/cli_args.py:302    --data-parallel-supervisor-port
dbo_decode_token_threshold              transport  engine/arg_utils.py:1336              --dbo-decode-token-threshold
dbo_prefill_token_threshold             transport  engine/arg_utils.py:1344              --dbo-prefill-token-threshold
dcp_comm_backend                        unknown    engine/arg_utils.py:1216              --dcp-comm-backend
dcp_kv_cache_interleave_size            unknown    engine/arg_utils.py:1224              --dcp-kv-cache-interleave-size
dcp_q_replicate                         unknown    engine/arg_utils.py:1220              --dcp-q-replicate
decode_context_parallel_size            transport  engine/arg_utils.py:1211              --decode-context-parallel-size -dcp
default_chat_template_kwargs            output     entrypoints/common/cli_args.py:104    --default-chat-template-kwargs
default_mm_loras                        output     engine/arg_utils.py:1631              --default-mm-loras
device_ids                              transport  engine/arg_utils.py:1194              --device-ids
diffusion_config                        unknown    engine/arg_utils.py:1877              --diffusion-config -dc
disable_access_log_for_endpoints        transport  entrypoints/common/cli_args.py:321    --disable-access-log-for-endpoints
disable_cascade_attn                    transport  engine/arg_utils.py:1018              --disable-cascade-attn
disable_chunked_mm_input                transport  engine/arg_utils.py:1791              --disable-chunked-mm-input
disable_custom_all_reduce               transport  engine/arg_utils.py:1366              --disable-custom-all-reduce
disable_fastapi_docs                    transport  entrypoints/common/cli_args.py:369    --disable-fastapi-docs
disable_hybrid_kv_cache_manager         unknown    engine/arg_utils.py:1806              --disable-hybrid-kv-cache-manager
disable_log_stats                       transport  engine/arg_utils.py:1919              --disable-log-stats
disable_nccl_for_dp_synchronization     transport  engine/arg_utils.py:1348              --disable-nccl-for-dp-synchronization
disable_sliding_window                  output     engine/arg_utils.py:1015              --disable-sliding-window
disable_uvicorn_access_log              transport  entrypoints/common/cli_args.py:319    --disable-uvicorn-access-log
distributed_executor_backend            transport  engine/arg_utils.py:1166              --distributed-executor-backend
distributed_timeout_seconds             transport  engine/arg_utils.py:1179              --distributed-timeout-seconds
download_dir                            transport  engine/arg_utils.py:1086              --download-dir
dp_supervisor_probe_failure_threshold   transport  entrypoints/common/cli_args.py:310    --dp-supervisor-probe-failure-threshold
dp_supervisor_probe_interval_s          transport  entrypoints/common/cli_args.py:305    --dp-supervisor-probe-interval-s
dp_supervisor_probe_timeout_s           transport  entrypoints/common/cli_args.py:307    --dp-supervisor-probe-timeout-s
dp_sync_interval                        transport  engine/arg_utils.py:1340              --dp-sync-interval
dtype                                   output     engine/arg_utils.py:977               --dtype
ec_manager_config                       unknown    engine/arg_utils.py:1887              --ec-manager-config
ec_transfer_config                      unknown    engine/arg_utils.py:1884              --ec-transfer-config
elastic_ep_max_dp_size                  unknown    engine/arg_utils.py:1332              --elastic-ep-max-dp-size
enable_auto_tool_choice                 output     entrypoints/common/cli_args.py:123    --enable-auto-tool-choice
enable_batch_sharded_sampling           output     engine/arg_utils.py:1309              --enable-batch-sharded-sampling
enable_chunked_prefill                  transport  engine/arg_utils.py:1784              --enable-chunked-prefill
enable_cumem_allocator                  transport  engine/arg_utils.py:1060              --enable-cumem-allocator
enable_dbo                              transport  engine/arg_utils.py:1320              --enable-dbo
enable_elastic_ep                       unknown    engine/arg_utils.py:1329              --enable-elastic-ep
enable_ep_weight_filter                 unknown    engine/arg_utils.py:1313              --enable-ep-weight-filter
enable_eplb                             transport  engine/arg_utils.py:1352              --enable-eplb
enable_expert_parallel                  transport  engine/arg_utils.py:1304              --enable-expert-parallel -ep
enable_fault_tolerance                  unknown    engine/arg_utils.py:1374              --enable-fault-tolerance
enable_flash_late_interaction           unknown    entrypoints/common/cli_args.py:382    --enable-flash-late-interaction
enable_flashinfer_autotune              transport  engine/arg_utils.py:1838              --enable-flashinfer-autotune
enable_force_include_usage              transport  entrypoints/common/cli_args.py:162    --enable-force-include-usage
enable_hc_sp                            unknown    engine/arg_utils.py:1303              --enable-hc-sp
enable_layerwise_nvtx_tracing           transport  engine/arg_utils.py:1712              --enable-layerwise-nvtx-tracing
enable_log_deltas                       transport  entrypoints/common/cli_args.py:178    --enable-log-deltas
enable_log_outputs                      transport  entrypoints/common/cli_args.py:174    --enable-log-outputs
enable_log_requests                     transport  engine/arg_utils.py:3259              --enable-log-requests
enable_logging_iteration_details        transport  engine/arg_utils.py:1720              --enable-logging-iteration-details
enable_lora                             output     engine/arg_utils.py:1609              --enable-lora
enable_mamba_cache_stochastic_rounding  output     engine/arg_utils.py:1127              --enable-mamba-cache-stochastic-rounding
enable_mamba_shared_prefix_checkpoint   unknown    engine/arg_utils.py:1444              --enable-mamba-shared-prefix-checkpoint
enable_mfu_metrics                      transport  engine/arg_utils.py:1716              --enable-mfu-metrics
enable_mixed_moe_lora_format            output     engine/arg_utils.py:1635              --enable-mixed-moe-lora-format
enable_mm_embeds                        output     engine/arg_utils.py:1502              --enable-mm-embeds
enable_moe_shared_loras                 output     engine/arg_utils.py:1639              --enable-moe-shared-loras
enable_nccl_comm_suspend                transport  engine/arg_utils.py:1063              --enable-nccl-comm-suspend
enable_offline_docs                     transport  entrypoints/common/cli_args.py:377    --enable-offline-docs
enable_per_request_metrics              transport  entrypoints/common/cli_args.py:158    --enable-per-request-metrics
enable_prefix_caching                   transport  engine/arg_utils.py:1401              --enable-prefix-caching
enable_prompt_embeds                    output     engine/arg_utils.py:1027              --enable-prompt-embeds
enable_prompt_tokens_details            transport  entrypoints/common/cli_args.py:156    --enable-prompt-tokens-details
enable_request_id_headers               transport  entrypoints/common/cli_args.py:367    --enable-request-id-headers
enable_return_routed_experts            unknown    engine/arg_utils.py:1001              --enable-return-routed-experts
enable_scale_out                        unknown    entrypoints/common/cli_args.py:216    --enable-scale-out
enable_server_load_tracking             transport  entrypoints/common/cli_args.py:160    --enable-server-load-tracking
enable_shm_tensor_arena                 unknown    engine/arg_utils.py:1321              --enable-shm-tensor-arena
enable_sleep_mode                       transport  engine/arg_utils.py:1046              --enable-sleep-mode
enable_ssl_refresh                      transport  entrypoints/common/cli_args.py:352    --enable-ssl-refresh
enable_tokenizer_info_endpoint          transport  entrypoints/common/cli_args.py:171    --enable-tokenizer-info-endpoint
enable_tower_connector_lora             output     engine/arg_utils.py:1620              --enable-tower-connector-lora
enable_trace_replay                     unknown    engine/arg_utils.py:1012              --enable-trace-replay
enforce_eager                           transport  engine/arg_utils.py:1000              --enforce-eager
engram_config                           unknown    engine/arg_utils.py:1896              --engram-config
eplb_config                             transport  engine/arg_utils.py:1353              --eplb-config
exclude_tools_when_tool_choice_none     output     entrypoints/common/cli_args.py:126    --exclude-tools-when-tool-choice-none
expert_placement_strategy               transport  engine/arg_utils.py:1354              --expert-placement-strategy
fail_on_environ_validation              transport  engine/arg_utils.py:1932              --fail-on-environ-validation
fault_tolerance_config                  unknown    engine/arg_utils.py:1377              --fault-tolerance-config
fingerprint_mode                        transport  entrypoints/common/cli_args.py:223    --fingerprint-mode
fingerprint_value                       transport  entrypoints/common/cli_args.py:233    --fingerprint-value
fully_sharded_loras                     output     engine/arg_utils.py:1625              --fully-sharded-loras
gdn_prefill_backend                     output     engine/arg_utils.py:1947              --gdn-prefill-backend
generation_config                       output     engine/arg_utils.py:1040              --generation-config
gpu_memory_utilization                  transport  engine/arg_utils.py:1388              --gpu-memory-utilization --device-memory-utilization
grpc                                    transport  entrypoints/common/cli_args.py:465    --grpc
grpc_port                               transport  entrypoints/common/cli_args.py:297    --grpc-port
h11_max_header_count                    transport  entrypoints/common/cli_args.py:374    --h11-max-header-count
h11_max_incomplete_event_size           transport  entrypoints/common/cli_args.py:371    --h11-max-incomplete-event-size
headless                                transport  entrypoints/common/cli_args.py:444    --headless
hf_config_path                          output     engine/arg_utils.py:979               --hf-config-path
hf_overrides                            output     engine/arg_utils.py:1035              --hf-overrides
hf_token                                output     engine/arg_utils.py:1034              --hf-token
host                                    transport  entrypoints/common/cli_args.py:293    --host
ignore_patterns                         transport  engine/arg_utils.py:1101              --ignore-patterns
interleave_mm_strings                   output     engine/arg_utils.py:1550              --interleave-mm-strings
io_processor_plugin                     transport  engine/arg_utils.py:1071              --io-processor-plugin
ir_op_priority                          output     engine/arg_utils.py:1837              --ir-op-priority
jit_monitor_mode                        transport  engine/arg_utils.py:1724              --jit-monitor-mode
jit_monitor_verbose                     transport  engine/arg_utils.py:1728              --jit-monitor-verbose
kda_decode_backend                      output     engine/arg_utils.py:1962              --kda-decode-backend
kda_prefill_backend                     output     engine/arg_utils.py:1954              --kda-prefill-backend
kernel_config                           output     engine/arg_utils.py:1898              --kernel-config
kv_cache_dtype                          output     engine/arg_utils.py:1397              --kv-cache-dtype
kv_cache_dtype_skip_layers              output     engine/arg_utils.py:1415              --kv-cache-dtype-skip-layers
kv_cache_memory_bytes                   transport  engine/arg_utils.py:1394              --kv-cache-memory-bytes
kv_cache_metrics                        transport  engine/arg_utils.py:1697              --kv-cache-metrics
kv_cache_metrics_sample                 transport  engine/arg_utils.py:1700              --kv-cache-metrics-sample
kv_events_config                        transport  engine/arg_utils.py:1883              --kv-events-config
kv_offloading_backend                   unknown    engine/arg_utils.py:1455              --kv-offloading-backend
kv_offloading_size                      unknown    engine/arg_utils.py:1452              --kv-offloading-size
kv_sharing_fast_prefill                 output     engine/arg_utils.py:1418              --kv-sharing-fast-prefill
kv_transfer_config                      unknown    engine/arg_utils.py:1880              --kv-transfer-config
language_model_only                     output     engine/arg_utils.py:1496              --language-model-only
limit_mm_per_prompt                     output     engine/arg_utils.py:1499              --limit-mm-per-prompt
linear_backend                          output     engine/arg_utils.py:1848              --linear-backend
load_format                             output     engine/arg_utils.py:1085              --load-format
log_config_file                         transport  engine/arg_utils.py:1665              --log-config-file
log_error_stack                         transport  entrypoints/common/cli_args.py:209    --log-error-stack
log_level                               transport  engine/arg_utils.py:1656              --log-level
logging_config                          transport  engine/arg_utils.py:1655              --logging-config
logits_processors                       output     engine/arg_utils.py:1068              --logits-processors
logprobs_mode                           output     engine/arg_utils.py:1010              --logprobs-mode
long_prefill_token_threshold            transport  engine/arg_utils.py:1771              --long-prefill-token-threshold
long_prefill_token_threshold_adaptive   unknown    engine/arg_utils.py:1775              --long-prefill-token-threshold-adaptive
lora_dtype                              output     engine/arg_utils.py:1616              --lora-dtype
lora_modules                            output     entrypoints/common/cli_args.py:81     --lora-modules
lora_target_modules                     output     engine/arg_utils.py:1628              --lora-target-modules
mamba_backend                           output     engine/arg_utils.py:1123              --mamba-backend
mamba_block_size                        unknown    engine/arg_utils.py:1430              --mamba-block-size
mamba_cache_dtype                       output     engine/arg_utils.py:1424              --mamba-cache-dtype
mamba_cache_mode                        transport  engine/arg_utils.py:1436              --mamba-cache-mode
mamba_cache_philox_rounds               output     engine/arg_utils.py:1131              --mamba-cache-philox-rounds
mamba_ssm_cache_dtype                   output     engine/arg_utils.py:1427              --mamba-ssm-cache-dtype
mamba_ssu_algorithm                     output     engine/arg_utils.py:1124              --mamba-ssu-algorithm
master_addr                             transport  engine/arg_utils.py:1175              --master-addr
master_port                             transport  engine/arg_utils.py:1176              --master-port
max_cpu_loras                           output     engine/arg_utils.py:1624              --max-cpu-loras
max_cudagraph_capture_size              transport  engine/arg_utils.py:1826              --max-cudagraph-capture-size
max_log_len                             transport  entrypoints/common/cli_args.py:153    --max-log-len
max_logprobs                            output     engine/arg_utils.py:1009              --max-logprobs
max_lora_cls_labels                     output     engine/arg_utils.py:1643              --max-lora-cls-labels
max_lora_rank                           output     engine/arg_utils.py:1615              --max-lora-rank
max_loras                               output     engine/arg_utils.py:1614              --max-loras
max_model_len                           output     engine/arg_utils.py:991               --max-model-len
max_num_active_seqs                     transport  engine/arg_utils.py:1760              --max-num-active-seqs
max_num_batched_tokens                  transport  engine/arg_utils.py:1739              --max-num-batched-tokens
max_num_queued_reqs                     transport  engine/arg_utils.py:1764              --max-num-queued-reqs
max_num_queued_tokens                   transport  engine/arg_utils.py:1767              --max-num-queued-tokens
max_num_scheduled_tokens                transport  engine/arg_utils.py:1746              --max-num-scheduled-tokens
max_num_seqs                            transport  engine/arg_utils.py:1753              --max-num-seqs
max_parallel_loading_workers            transport  engine/arg_utils.py:1359              --max-parallel-loading-workers
media_io_kwargs                         output     engine/arg_utils.py:1505              --media-io-kwargs
middleware                              transport  entrypoints/common/cli_args.py:361    --middleware
mm_device_do_normalize                  unknown    engine/arg_utils.py:1595              --mm-device-do-normalize
mm_encoder_attn_backend                 output     engine/arg_utils.py:1530              --mm-encoder-attn-backend
mm_encoder_attn_dtype                   output     engine/arg_utils.py:1534              --mm-encoder-attn-dtype
mm_encoder_fp8_scale_path               output     engine/arg_utils.py:1538              --mm-encoder-fp8-scale-path
mm_encoder_fp8_scale_save_margin        unknown    engine/arg_utils.py:1546              --mm-encoder-fp8-scale-save-margin
mm_encoder_fp8_scale_save_path          unknown    engine/arg_utils.py:1542              --mm-encoder-fp8-scale-save-path
mm_encoder_only                         unknown    engine/arg_utils.py:1524              --mm-encoder-only
mm_encoder_tp_mode                      unknown    engine/arg_utils.py:1527              --mm-encoder-tp-mode
mm_hasher_algorithm                     transport  engine/arg_utils.py:1517              --mm-hasher-algorithm
mm_ipc_gpu_memory_gb                    transport  engine/arg_utils.py:1591              --mm-ipc-gpu-memory-gb
mm_processor_cache_gb                   transport  engine/arg_utils.py:1511              --mm-processor-cache-gb
mm_processor_cache_type                 transport  engine/arg_utils.py:1514              --mm-processor-cache-type
mm_processor_device                     unknown    engine/arg_utils.py:1567              --mm-processor-device
mm_processor_kwargs                     output     engine/arg_utils.py:1508              --mm-processor-kwargs
mm_shm_cache_max_object_size_mb         transport  engine/arg_utils.py:1520              --mm-shm-cache-max-object-size-mb
mm_tensor_ipc                           transport  engine/arg_utils.py:1564              --mm-tensor-ipc
model                                   output     engine/arg_utils.py:969               --model
model_class_overrides                   output     engine/arg_utils.py:1036              --model-class-overrides
model_impl                              output     engine/arg_utils.py:1067              --model-impl
model_loader_extra_config               output     engine/arg_utils.py:1098              --model-loader-extra-config
model_tag                               output     entrypoints/common/cli_args.py:438    model_tag
moe_backend                             output     engine/arg_utils.py:1845              --moe-backend
monokernel                              output     engine/arg_utils.py:1842              --monokernel
nnodes                                  transport  engine/arg_utils.py:1177              --nnodes -n
node_rank                               transport  engine/arg_utils.py:1178              --node-rank -r
num_gpu_blocks_override                 transport  engine/arg_utils.py:1398              --num-gpu-blocks-override
numa_bind                               transport  engine/arg_utils.py:1187              --numa-bind
numa_bind_cpus                          transport  engine/arg_utils.py:1191              --numa-bind-cpus
numa_bind_nodes                         transport  engine/arg_utils.py:1188              --numa-bind-nodes
offload_backend                         unknown    engine/arg_utils.py:1467              --offload-backend
offload_group_size                      unknown    engine/arg_utils.py:1474              --offload-group-size
offload_num_in_group                    unknown    engine/arg_utils.py:1478              --offload-num-in-group
offload_params                          unknown    engine/arg_utils.py:1486              --offload-params
offload_prefetch_step                   unknown    engine/arg_utils.py:1482              --offload-prefetch-step
optimization_level                      output     engine/arg_utils.py:1910              --optimization-level
otlp_traces_endpoint                    transport  engine/arg_utils.py:1686              --otlp-traces-endpoint
override_generation_config              output     engine/arg_utils.py:1043              --override-generation-config
per_request_spec_decode_metrics         transport  engine/arg_utils.py:1693              --per-request-spec-decode-metrics
performance_mode                        output     engine/arg_utils.py:1913              --performance-mode
pipeline_parallel_size                  transport  engine/arg_utils.py:1170              --pipeline-parallel-size -pp
pooler_config                           output     engine/arg_utils.py:1039              --pooler-config
port                                    transport  entrypoints/common/cli_args.py:295    --port
prefill_context_parallel_size           transport  engine/arg_utils.py:1235              --prefill-context-parallel-size -pcp
prefill_schedule_interval               unknown    engine/arg_utils.py:1802              --prefill-schedule-interval
prefix_cache_retention_interval         transport  engine/arg_utils.py:1411              --prefix-cache-retention-interval
prefix_caching_hash_algo                transport  engine/arg_utils.py:1408              --prefix-caching-hash-algo
prefix_match_unit                       unknown    engine/arg_utils.py:1433              --prefix-match-unit
profiler_config                         transport  engine/arg_utils.py:1908              --profiler-config
pt_load_map_location                    transport  engine/arg_utils.py:1103              --pt-load-map-location
quantization                            output     engine/arg_utils.py:992               --quantization -q
quantization_config                     output     engine/arg_utils.py:993               --quantization-config
ray_workers_use_nsight                  transport  engine/arg_utils.py:1363              --ray-workers-use-nsight
reasoning_config                        output     engine/arg_utils.py:1897              --reasoning-config
reasoning_effort_map                    output     entrypoints/common/cli_args.py:110    --reasoning-effort-map
reasoning_parser                        output     engine/arg_utils.py:1146              --reasoning-parser
reasoning_parser_plugin                 output     engine/arg_utils.py:1151              --reasoning-parser-plugin
renderer_num_workers                    transport  engine/arg_utils.py:1074              --renderer-num-workers
replayssm_buffer_len                    unknown    engine/arg_utils.py:1448              --replayssm-buffer-len
response_role                           output     entrypoints/common/cli_args.py:117    --response-role
return_sampling_mask                    output     engine/arg_utils.py:1005              --return-sampling-mask
return_tokens_as_token_ids              output     entrypoints/common/cli_args.py:119    --return-tokens-as-token-ids
revision                                output     engine/arg_utils.py:986               --revision
root_path                               transport  entrypoints/common/cli_args.py:359    --root-path
runner                                  output     engine/arg_utils.py:970               --runner
safetensors_load_strategy               transport  engine/arg_utils.py:1087              --safetensors-load-strategy
safetensors_prefetch_block_size         transport  engine/arg_utils.py:1094              --safetensors-prefetch-block-size
safetensors_prefetch_num_threads        transport  engine/arg_utils.py:1090              --safetensors-prefetch-num-threads
scheduler_cls                           unknown    engine/arg_utils.py:1794              --scheduler-cls
scheduler_reserve_full_isl              transport  engine/arg_utils.py:1797              --scheduler-reserve-full-isl
scheduling_policy                       transport  engine/arg_utils.py:1781              --scheduling-policy
seed                                    transport  engine/arg_utils.py:978               --seed
served_model_name                       transport  engine/arg_utils.py:1030              --served-model-name
show_hidden_metrics_for_version         transport  engine/arg_utils.py:1682              --show-hidden-metrics-for-version
shutdown_timeout                        transport  engine/arg_utils.py:1940              --shutdown-timeout
skip_mm_profiling                       transport  engine/arg_utils.py:1553              --skip-mm-profiling
skip_tokenizer_init                     output     engine/arg_utils.py:1024              --skip-tokenizer-init
sleep_mode_backend                      transport  engine/arg_utils.py:1049              --sleep-mode-backend
sleep_mode_offload_cudagraph            transport  engine/arg_utils.py:1052              --sleep-mode-offload-cudagraph
sleep_preserve_parameter_names          transport  engine/arg_utils.py:1056              --sleep-preserve-parameter-names
sparse_indexer_topk_backend             output     engine/arg_utils.py:1851              --sparse-indexer-topk-backend
spec_method                             output     engine/arg_utils.py:1869              --spec-method
spec_model                              output     engine/arg_utils.py:1870              --spec-model
spec_tokens                             output     engine/arg_utils.py:1871              --spec-tokens
specialize_active_lora                  output     engine/arg_utils.py:1632              --specialize-active-lora
speculative_config                      output     engine/arg_utils.py:1865              --speculative-config -sc
sse_keep_alive_interval                 transport  entrypoints/common/cli_args.py:164    --sse-keep-alive-interval
ssl_ca_certs                            transport  entrypoints/common/cli_args.py:350    --ssl-ca-certs
ssl_cert_reqs                           transport  entrypoints/common/cli_args.py:354    --ssl-cert-reqs
ssl_certfile                            transport  entrypoints/common/cli_args.py:348    --ssl-certfile
ssl_ciphers                             transport  entrypoints/common/cli_args.py:356    --ssl-ciphers
ssl_keyfile                             transport  entrypoints/common/cli_args.py:346    --ssl-keyfile
stream_interval                         transport  engine/arg_utils.py:1813              --stream-interval
structured_outputs_config               output     engine/arg_utils.py:1902              --structured-outputs-config
swa_bounded_replay                      unknown    engine/arg_utils.py:1421              --swa-bounded-replay
tensor_parallel_size                    transport  engine/arg_utils.py:1208              --tensor-parallel-size -tp
tokenizer                               output     engine/arg_utils.py:972               --tokenizer
tokenizer_mode                          output     engine/arg_utils.py:973               --tokenizer-mode
tokenizer_revision                      output     engine/arg_utils.py:988               --tokenizer-revision
tokens_only                             output     entrypoints/common/cli_args.py:211    --tokens-only
tool_call_parser                        output     entrypoints/common/cli_args.py:129    --tool-call-parser
tool_parser_plugin                      output     entrypoints/common/cli_args.py:134    --tool-parser-plugin
tool_server                             output     entrypoints/common/cli_args.py:146    --tool-server
tool_strict_level                       output     entrypoints/common/cli_args.py:138    --tool-strict-level
trust_remote_code                       output     engine/arg_utils.py:974               --trust-remote-code
trust_request_chat_template             output     entrypoints/common/cli_args.py:95     --trust-request-chat-template
trust_request_mm_kwargs                 output     entrypoints/common/cli_args.py:99     --trust-request-mm-kwargs
ubatch_size                             transport  engine/arg_utils.py:1325              --ubatch-size
uds                                     transport  entrypoints/common/cli_args.py:313    --uds
use_fp64_gumbel                         output     engine/arg_utils.py:1011              --use-fp64-gumbel
use_replayssm                           unknown    engine/arg_utils.py:1451              --use-replayssm
use_tqdm_on_load                        transport  engine/arg_utils.py:1102              --use-tqdm-on-load
uvicorn_log_level                       transport  entrypoints/common/cli_args.py:315    --uvicorn-log-level
video_pruning_method                    output     engine/arg_utils.py:1560              --video-pruning-method
video_pruning_rate                      output     engine/arg_utils.py:1557              --video-pruning-rate
watchdog_config                         transport  engine/arg_utils.py:1909              --watchdog-config
watermark                               output     engine/arg_utils.py:1801              --watermark
watermark_config                        output     engine/arg_utils.py:1875              --watermark-config
weight_transfer_config                  unknown    engine/arg_utils.py:1914              --weight-transfer-config
worker_cls                              unknown    engine/arg_utils.py:1370              --worker-cls
worker_extension_cls                    unknown    engine/arg_utils.py:1371              --worker-extension-cls
"""

ARGUMENTS: dict[str, Argument] = {
    dest: Argument(dest, klass, cite, tuple(options))
    for dest, klass, cite, *options in (line.split() for line in _TABLE.splitlines())
}
_BY_OPTION = {o: a.dest for a in ARGUMENTS.values() for o in a.options}


def dest_of(option: str) -> str | None:
    """The destination an option string sets (``--max-model-len``, ``-q``, ``--max_model_len``,
    ``--no-enable-prefix-caching``), or ``None`` when vLLM 0.33 registers no such option."""
    name = option.partition("=")[0]
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    if name in _BY_OPTION:
        return _BY_OPTION[name]
    if name.startswith("--no-") and "--" + name[5:] in _BY_OPTION:  # argparse.BooleanOptionalAction
        return _BY_OPTION["--" + name[5:]]
    return None


def _canonical(value: Any) -> Any:
    """A value as the id holds it: text that is JSON (``40960``, ``{"num_hidden_layers": 1}``,
    ``true``) read as JSON, so that a command line and a YAML mapping agree."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if not isinstance(parsed, str) else value
    return value


def identity_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The output-changing arguments of ``arguments`` (dest: value), as they enter the config id."""
    return {
        k: _canonical(v)
        for k, v in sorted(arguments.items())
        if k not in SEPARATE and k in ARGUMENTS and ARGUMENTS[k].klass == "output" and v is not None
    }
