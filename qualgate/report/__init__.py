"""Reports: the gate's text and markdown (:mod:`.gate_text`), a run's report (:mod:`.run`), the
HTML page (:mod:`.html`, laid out by :mod:`.page`, figures from :mod:`.plots`)."""
