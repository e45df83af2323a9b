"""vLLM 0.33's rules, in one table (:mod:`.rules`), and what follows from them: speculative-config
resolution (:mod:`.speculative`), the ``vllm serve`` argument reader (:mod:`.cli_args`) and the
serving-config reader (:mod:`.serving`)."""
