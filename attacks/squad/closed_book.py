"""Closed-book answers of a small causal LM: a fake answer of the kind the question asks for.

Jia and Liang's rules past the named-entity types give a word of the answer's part of speech or
a catch-all ("hamsters", "aliens"); their crowd workers then threw out or mended the sentences
whose fake fitted no reading of the question. Read on XQuAD-en, a quarter of the rules' fakes
were of no kind the question could take ("steam engines" for another term for a string, a
bridge as a prime minister). A language model asked the question with no passage answers with
a phrase of the asked kind, right or wrong ("What satellite ...?": "Astra 1A"; "How did he build
a strong economic base?": "by taxing diamonds"), which is what a fake answer needs.

The model reads a fixed few-shot prompt (written here, none of it from SQuAD) and the question
alone, and decodes greedily in fp32 (bf16 where asked), in batches of fixed size and order
(questions of about one length together, so that a batch pads little): the same questions give
the same answers on a machine. The decoder is the project's one (models.decoders.greedy_decoding),
the shots its shared prefix: their keys and values are computed once, and each question costs its
own tokens. An answer is dropped, so that the rules after it are used, when
it is not a short phrase, repeats a content word of the question, is a refusal ("I don't know"),
or restates a gold (`unlike_the_golds`: the model is sometimes right in other words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advrace.core.numbers import significant
from advrace.models.decoders.continuation_scoring import encode_request, shared_logprobs
from advrace.models.decoders.fluency import MAX_SENTENCE_TOKENS, start_token
from advrace.models.decoders.greedy_decoding import SharedPrefix, greedy_generate
from advrace.models.decoders.loaded_lm import loaded_lm
from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.loading import SMOLLM2
from advrace.models.runtime.precision import cpu_threads

from .answer_rules import number_values

# the shots span the kinds a SQuAD question asks for: a named place, a person, a year, a thing,
# a reason, a manner, a quality, a number; bare, for the declarative rules give "because of", "by"
# and "in" themselves
SHOTS = (("What river runs alongside the old town?", "the Hillsborough River"),
         ("Who designed the first steam locomotive?", "George Stephenson"),
         ("When was the lighthouse built?", "1874"),
         ("What do koalas mainly eat?", "eucalyptus leaves"),
         ("Why did the bridge collapse?", "corrosion"),
         ("How did the company raise money?", "selling bonds"),
         ("What kind of climate does the island have?", "tropical"),
         ("How many moons does the planet have?", "four"))
_SHOT_ANSWERS = frozenset(a.lower() for _, a in SHOTS)
PROMPT = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in SHOTS) + "Q: {question}\nA:"

MAX_WORDS = 6
_LEADING = re.compile(r"^(because of|because|by|in|on|at|during)\s+", re.I)
_REFUSAL = re.compile(r"\b(i don'?t|i do not|unknown|not sure|no answer|cannot|can't|answer is|none)\b", re.I)


# The MiniLM cosine (mean-pooled, the audit's paraphrase encoder) with a gold from which a closed-book
# answer is the gold in other words ("America" for "the United States"), not another answer of its
# kind: measured on XQuAD-en, docs/results.md ("Closed-book fakes that restate the gold")
MAX_GOLD_COSINE = 0.75
_RESTATES = frozenset({"synonym", "spelling variant", "inflection"})  # resources.same_meaning's


@dataclass(frozen=True)
class ClosedAnswer:
    """A closed-book answer kept as a fake, with its cosine with the nearest gold (recorded in the
    sentence's provenance as `fake_cosine`)."""

    text: str
    gold_cosine: float


# The pointwise mutual information of a fake with its question (`ClosedBook.pmi`): how much more
# likely the question makes the fake than a content-free question does. The question alone, not
# after the shots: each question and its fakes then run as one packed row of about 40 tokens
# instead of about 160 (docs/attacks/adversarial-squad.md, "The answer model chooses")
PMI_PROMPT = "Q: {question}\nA:"
NULL_QUESTION = "N/A"  # content-free, as in Zhao et al.'s contextual calibration
_NULL_GROUP = 32  # fakes per content-free row: a packed row stays short


def _bare(text: str) -> str:
    return re.sub(r"^(the|a|an)\s+", "", text.strip(), flags=re.I)


def _restates(answer: str, gold: str, cosine: float, resources) -> bool:
    """Whether `answer` is `gold` in other words: the same numbers where both state some ("ten
    years" for "10 years"; the encoder puts 1973 and 1974 as near as paraphrases), else a WordNet
    synonym (determiners aside: "America" for "the United States"), a run of the gold's words
    written otherwise ("space suits" for "new Apollo spacesuit"; or the other way round), or a
    cosine of MAX_GOLD_COSINE or more ("autoimmune disease" for "autoimmunity", "basketball" for
    "NBA" as a sport)."""
    values, gold_values = number_values(answer), number_values(gold)
    if values and gold_values:
        return values == gold_values
    if _joined(answer, resources) in _joined_runs(gold, resources) or \
            _joined(gold, resources) in _joined_runs(answer, resources):
        return True
    return cosine >= MAX_GOLD_COSINE or resources.same_meaning(_bare(gold), _bare(answer), None) in _RESTATES


def _words(text: str, resources) -> list[str]:
    """The words of `text`, lowercased and singular (WordNet's noun forms), determiners aside."""
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in ("the", "a", "an")]
    return [resources.wordnet.morphy(w, "n") or w for w in words]


def _joined(text: str, resources) -> str:
    return "".join(_words(text, resources))


def _joined_runs(text: str, resources) -> set[str]:
    """Every run of the text's words written as one ("space suits" within "new Apollo spacesuit":
    read on XQuAD-en at cosine 0.58, the gold in other spacing)."""
    words = _words(text, resources)
    return {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}


def unlike_the_golds(answers: dict, golds: dict, resources) -> dict:
    """The usable answers (`answers`: key -> text or None) that restate no gold of their key
    (`golds`: key -> texts; `_restates`), key -> ClosedAnswer with the cosine with the nearest
    gold. The model answers the question, and is sometimes right: a fake that restates the gold
    is a second right answer."""
    from advrace.models.encoders.paraphrase import paraphrase_cosines  # deferred: start-up time (torch)

    pairs = [(a, g) for k, a in answers.items() if a for g in golds[k]]
    cosines = dict(zip(pairs, paraphrase_cosines(pairs)))
    out = {}
    for k, a in answers.items():
        if a and golds[k] and not any(_restates(a, g, cosines[a, g], resources) for g in golds[k]):
            out[k] = ClosedAnswer(a, significant(max(cosines[a, g] for g in golds[k])))
    return out


def usable(answer: str, question: str, stopwords, kind_words=()) -> str | None:
    """The answer as a fake, or None: a short phrase with no content word of the question but
    `kind_words`, the noun it asks for ("What type of professional": "a medical professional")."""
    answer = answer.strip().split("\n")[0].strip().rstrip(".").strip().strip('"').strip()
    answer = _LEADING.sub("", answer)  # the declarative rules add their own
    words = re.findall(r"[\w'’-]+", answer)
    if not words or len(words) > MAX_WORDS or "?" in answer or _REFUSAL.search(answer) or \
            answer.lower() in ("yes", "no"):
        return None
    if answer.lower() in _SHOT_ANSWERS:
        return None  # the prompt's own example, not an answer to this question
    asked = {w.lower() for w in re.findall(r"[\w'’-]+", question)} - set(stopwords) - set(kind_words)
    if {w.lower() for w in words} & asked:
        return None  # "the Texans" for "Who did the Texans beat?": the question's own entity
    return answer


class ClosedBook:
    """A causal LM (a folder, a Hub name, or `smollm2`) that answers questions without a passage."""

    def __init__(self, model: str = SMOLLM2, batch_size: int = 32, max_new_tokens: int = 12,
                 bf16: bool | None = False):
        self.model_name, self.batch_size, self.max_new_tokens = model, batch_size, max_new_tokens
        self.bf16 = bf16  # as DistractorAttackConfig.bf16: fp32 unless asked
        self._loaded = None
        self._core = None  # the packed-decoding core (`_packed_core`)
        self._answers: dict[str, str] = {}

    def _load(self):
        if self._loaded is None:
            self._loaded = loaded_lm(self.model_name, self.bf16)
        return self._loaded

    def _packed_core(self) -> PackedCore:
        """The model's packed-decoding core, probed once: the PMI and the answers share it, and
        its `unshared` counts the questions that could not share the shots' cache."""
        model, _, device, _ = self._load()
        if self._core is None or self._core.model is not model:
            self._core = PackedCore(model, device)
        return self._core

    def pmi(self, pairs) -> list[float]:
        """Each (question, fake)'s pointwise mutual information under the model: the summed log-
        probability of the fake's tokens after the question (`PMI_PROMPT`) less that after a
        content-free one (`NULL_QUESTION`). The model's own answer is likely whatever the question;
        PMI asks which fake the question itself calls for. Computed afresh for each call, in
        sorted batches of fixed size: the same pairs give the same values."""
        import torch  # deferred: start-up time

        pairs = [(q.strip(), f.strip()) for q, f in pairs]
        if not pairs:
            return []
        model, tok, device, bf16 = self._load()
        core = self._packed_core()
        start = (start_token(tok),)
        pad = tok.pad_token_id if tok.pad_token_id is not None else start[0]
        by_question: dict[str, set[str]] = {}
        for q, f in pairs:
            by_question.setdefault(q, set()).add(f)
        fakes = sorted({f for _, f in pairs})
        rows = [(q, sorted(by_question[q])) for q in sorted(by_question)]
        nulls = [(None, fakes[i:i + _NULL_GROUP]) for i in range(0, len(fakes), _NULL_GROUP)]
        # the content-free rows (a group of fakes each) batched apart: one in a batch of question
        # rows padded them all to its length
        batches = [kind[i:i + self.batch_size] for kind in (rows, nulls)
                   for i in range(0, len(kind), self.batch_size)]
        logp: dict[tuple, float] = {}
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            for batch in batches:
                requests = [encode_request(tok, PMI_PROMPT.format(question=NULL_QUESTION if q is None else q),
                                           [f" {f}" for f in fs], max_length=MAX_SENTENCE_TOKENS, prefix=start)
                            for q, fs in batch]
                with cpu_threads(device):
                    sums = shared_logprobs(model, requests, pad_id=pad, device=device, core=core)
                for (q, fs), values in zip(batch, sums):
                    logp.update(((q, f), float(v)) for f, v in zip(fs, values))
        return [logp[q, f] - logp[None, f] for q, f in pairs]

    def answers(self, questions) -> dict[str, str]:
        """Raw answers to `questions` (each question once, in batches of questions of about one
        length, shortest first, ties in sorted order: the batches do not depend on the order the
        caller asks in, and a batch's prefill pads its rows to nearly their own length)."""
        todo = sorted({q.strip() for q in questions} - set(self._answers))
        if todo:
            import torch  # deferred: start-up time

            model, tok, device, bf16 = self._load()
            rows = {q: tuple(tok(f" {q}" + PROMPT.split("{question}")[1], add_special_tokens=False).input_ids)
                    for q in todo}
            todo.sort(key=lambda q: len(rows[q]))  # stable: the sorted order within a length
            with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                core = self._packed_core()
                shots = SharedPrefix(tok(PROMPT.split(" {question}")[0]).input_ids)  # run once, then shared
                for i in range(0, len(todo), self.batch_size):
                    batch = todo[i:i + self.batch_size]
                    with cpu_threads(device):  # fitted to the load, batch by batch
                        self._answers.update(zip(batch, self._greedy(core, shots, [rows[q] for q in batch])))
        return {q.strip(): self._answers[q.strip()] for q in questions}

    def _greedy(self, core: PackedCore, shots: SharedPrefix, rows: list[tuple[int, ...]]) -> list[str]:
        """Greedy answers to one batch (each question's tokens after the shots), each ending with
        the token that brings its first line break, or the end token (`usable` cuts the line
        break off)."""
        model, tok, device, _ = self._load()
        pad = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)

        def stop(tokens) -> bool:
            return tokens[-1] == tok.eos_token_id or "\n" in tok.decode(tokens)

        out = greedy_generate(model, rows, max_new_tokens=self.max_new_tokens, stop=stop, pad_id=pad,
                              device=device, core=core, prefix=shots)
        return [tok.decode(list(r), skip_special_tokens=True) for r in out]


_SHARED: dict[tuple, ClosedBook] = {}


def closed_book(model: str, batch_size: int = 32, bf16: bool | None = False) -> ClosedBook:
    """One model per process and name: AddOneSent and AddSentMod of one build ask the same questions."""
    key = (model, batch_size, bf16)
    if key not in _SHARED:
        _SHARED[key] = ClosedBook(model, batch_size, bf16=bf16)
    return _SHARED[key]
