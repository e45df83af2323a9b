"""The gate report on disk (the evidence contract): its one writer and reader, :mod:`.gate_report`."""
