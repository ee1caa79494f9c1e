"""Jia and Liang's SQuAD components, each module named for its job: the fake answers (the typed
pool, the answer rules, the closed-book reader's guesses), a question's candidate sentences, the
answer model's choice among them, the span model under attack, where the sentence goes. The
recipes on top (attacks/squad_addsent.py, attacks/squad_addany.py) build on them."""
