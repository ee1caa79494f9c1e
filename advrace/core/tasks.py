"""The two task names, used in examples, releases, attacks, checkpoints and reports."""

MULTIPLE_CHOICE = "multiple_choice"  # RACE: passage, question, options, label
EXTRACTIVE_QA = "extractive_qa"  # SQuAD v1.1: context, question, answer spans
TASKS = (MULTIPLE_CHOICE, EXTRACTIVE_QA)
