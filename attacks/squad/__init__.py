"""Jia and Liang's SQuAD components: fake answers (the rules by answer type, the type-keyed pool,
the closed-book reader's guesses). The SQuAD recipes build on them."""
