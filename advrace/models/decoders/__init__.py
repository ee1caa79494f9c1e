"""Decoder LMs: the packed-decoding core, prompts, continuation scoring and generation, the scoring protocol, lm-eval's race task, beam search and DG's tree decoder."""
