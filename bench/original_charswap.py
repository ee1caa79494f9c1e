"""The released AdvRACE CharSwap script (Attacks/charSwap/charAttack.py), as a timing baseline.

Its loop is kept as released: nltk tokenization of each question, option and passage, a
Lancaster-stemmed word list from the question and options, and, for every passage word, a scan
of that list that stems the word again for each entry. Two substitutions let it run offline,
both making it faster than the original, so a speed-up over it is an underestimate: tokens come
from nltk's word tokenizer without punkt's sentence split (`word_tokenize` needs punkt data),
and the stopwords are nltk's English list written out below (nltk's copy needs its data too).
Like the original, it keeps the passage swaps it computes and never writes them back.

    python bench/original_charswap.py IN.json OUT.json

IN.json is an AdvRACE release file, `race_id -> {context, question, options, label}`.
"""

import json
import random
import string
import sys

from nltk.stem.lancaster import LancasterStemmer
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.tokenize.treebank import TreebankWordDetokenizer
from tqdm import tqdm

NLTK_ENGLISH_STOPWORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've
now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split()

stemmer = LancasterStemmer()
tokenizer = NLTKWordTokenizer()
detokenizer = TreebankWordDetokenizer()
random.seed(2020)
stopwords = list(NLTK_ENGLISH_STOPWORDS)  # a list, as `stopwords.words('english')` returns
min_len = 4


def char_swap(text: str) -> str:
    if len(text) < min_len or text.lower() in stopwords:
        return text
    r = random.randint(1, len(text) - 3)
    if text[r] == text[r + 1]:
        r = random.randint(1, len(text) - 3)
    if text[r] == text[r + 1] or text[r].isdigit() or text[r + 1].isdigit():
        return text
    if text[r] in string.punctuation or text[r + 1] in string.punctuation:
        return text
    chars = list(text)
    chars[r], chars[r + 1] = chars[r + 1], chars[r]
    return "".join(chars)


def main(src: str, dst: str) -> None:
    with open(src) as f:
        data = json.load(f)
    out = {}
    for race_id, eg in tqdm(data.items(), disable=True):
        options = eg["options"]
        qw = tokenizer.tokenize(eg["question"])
        words = qw[:]
        for opt in options:
            words.extend(tokenizer.tokenize(opt))
        entity_list = []
        for w in words:
            if len(w) >= min_len and w.lower() not in stopwords:
                entity_list.append(stemmer.stem(w.lower()))
                entity_list.append(w.lower())
        entity_list = list(set(entity_list))
        cw = tokenizer.tokenize(eg["context"])
        question = detokenizer.detokenize([char_swap(w) for w in qw])
        new_context_words = []
        for w in cw:
            if len(w) >= min_len and w.lower() not in stopwords:
                for entity in entity_list:
                    stem_w = stemmer.stem(w.lower())
                    if entity in stem_w or entity in w.lower():
                        w = char_swap(w)
                        break
            new_context_words.append(w)
        out[race_id] = {"question": question, "context": eg["context"], "options": options,
                        "label": eg["label"]}
    with open(dst, "w") as f:
        json.dump(out, f, indent=4)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
