"""Decoding configs and plans (:mod:`.decoding`) and the option vocabularies every stage shares (:mod:`.options`)."""
