"""Encoder models: the multiple-choice encoder (training, evaluation and authoring), span extraction, the built-in readers, the paraphrase encoder."""
