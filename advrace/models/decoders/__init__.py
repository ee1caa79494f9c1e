"""Decoder LMs: the packed-decoding core, continuation scoring and generation, beam search and DG's tree decoder (what their numbers mean is advrace.models.protocol)."""
