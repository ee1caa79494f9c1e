"""Sentences from questions: declarative rewriting, question mutation, word swaps and fluency
ranking, shared by AdvRACE's AddSent and Jia and Liang's SQuAD attacks."""
