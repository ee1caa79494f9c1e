"""What a decoder LM's number means: the prompts, the scoring protocol, and lm-evaluation-harness's
race task. Evaluation, export and the judge all read it here."""
