"""Deciding: pairing baseline and candidate records (:mod:`.pairing`), flipped questions
(:mod:`.flips`), one scope's statistics and the decision rule (:mod:`.scope`), the fixed-sample
gate (:mod:`.fixed`) and the sequential gate (:mod:`.sequential`), per-suite policies
(:mod:`.policy`) and A/A calibration (:mod:`.calibration`)."""
