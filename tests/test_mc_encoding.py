from advrace.core.examples import MCExample
from advrace.models.encoders.mc_encoding import collate_mc, encode_mc, question_with_option
from advrace.models.runtime.batching import length_sorted_batches


def test_blank_filling_and_appending():
    assert question_with_option("John is a great  _  singer.", "folk") == "John is a great folk singer."
    assert question_with_option("Why did he go?", "To eat.") == "Why did he go? To eat."
    # options are text, not regex templates (real RACE has "marry a better man\woman")
    assert question_with_option("She wants to  _  .", r"marry a better man\woman") == \
        r"She wants to marry a better man\woman ."


class WordTokenizer:
    """Whitespace tokenizer with the call signature encode_mc uses."""

    def __call__(self, firsts, seconds, truncation, max_length, padding, return_attention_mask):
        ids = []
        for a, b in zip(firsts, seconds):
            a_ids = [len(w) for w in a.split()][: max(0, max_length - 3 - len(b.split()))]
            ids.append([101] + a_ids + [102] + [len(w) for w in b.split()] + [102])
        return {"input_ids": ids}


def test_encode_collate_and_batches():
    exs = [MCExample(id=str(i), passage="word " * (i + 1), question="q _ ?", options=("a", "bb", "c", "d"),
                     label=i % 4) for i in range(5)]
    feats = encode_mc(WordTokenizer(), exs, max_length=16)
    assert [f.length for f in feats] == [7, 8, 9, 10, 11]
    batch = collate_mc(feats[:2])
    assert batch["input_ids"].shape == (2, 4, 8) and batch["labels"].tolist() == [0, 1]
    assert batch["attention_mask"][0, 0].tolist() == [1] * 7 + [0]
    assert length_sorted_batches(feats, 2) == [[4, 3], [2, 1], [0]]
