"""The components of the model-based distractor attacks (AdvRACE's DE and DG, whose recipes are
attacks/distractor_extraction.py and attacks/distractor_generation.py): one module per job.

- `attack`: `DistractorAttack`, the steps from proposed candidates to new distractors, in order;
- `config`: `DistractorAttackConfig`, the settings they share, and their checks;
- `generation`: DG's candidates, beam-decoded from a seq2seq (UniLM) or causal-LM generator;
- `candidate_cache`: a model's candidates, once for the splits of one build that choose differently;
- `checks`: the candidates through the shared validity checks (advrace.core.checks, the judge among them);
- `reader_ranking`: SWAG's adversarial filtering by readers (`select_with`);
- `replacement`: three chosen candidates become the distractors, with their provenance;
- `statistics`: the split's option statistics (stats.json);
- `model_records`: what the manifest records of each model used (name, sha256, training).
"""

from .attack import DistractorAttack
from .config import DistractorAttackConfig

__all__ = ["DistractorAttack", "DistractorAttackConfig"]
