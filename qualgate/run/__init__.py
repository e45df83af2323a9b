"""Executing a plan: work items and request seeds, the runner (:mod:`.runner`), the manifest and
lock (:mod:`.manifest`), sequential rounds (:mod:`.sequential`), interleaved speed rounds
(:mod:`.speed`) and grid sweeps (:mod:`.sweep`)."""
