"""Sequence-to-sequence distractor generators: UniLM and its inputs."""
