"""The grammar check of inserted sentences (advrace.core.checks.grammar) and the audit's fluency
outliers: each rule flags the broken sentence the question-to-statement rules wrote on XQuAD-en
(issue 46) and not its English twin; a split's rates per kind reach stats.json's audit counts."""

import pytest
import torch

from advrace.core.checks import TextContext
from advrace.core.checks.grammar import (ARTICLE, AUX_FORM, BECAUSE_OF, DOUBLED_AUX, FLUENCY, NO_FINITE, PASSIVE_OBJECT,
                                         QUESTION_FORM, STRANDED, Grammar, grammar_problems)
from advrace.core.examples import Answer, SpanExample
from advrace.core.provenance import AdversarialSentence, AttackSummary
from advrace.release import audit as A
from advrace.resources import get_resources


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.mark.parametrize("broken, kind, fine", [
    ("Soulias Morris from is in Paris.", STRANDED, "Soulias Morris is from Paris."),
    ("Kublai Khan cross to entered the Altai Mountains.", STRANDED, "Kublai Khan crossed the Altai Mountains."),
    ("Calvin described the mass that was viewed as sacrifice by criticised.", STRANDED,
     "The house he lived in was sold in 1990."),
    ("The adoption of laws which will must have a binding effect.", DOUBLED_AUX,
     "It will have been built by 2020."),
    ("The name of the quarterback who is was Kony Ealy.", DOUBLED_AUX, "The team has been winning since 1990."),
    ("Mazda Mechanical did replaced the turbines.", AUX_FORM, "He did not go."),
    ("The minor result of job restructuring would a rise in wages be.", AUX_FORM,
     "The minor result of job restructuring would be a rise in wages."),
    ("Isaac condemned vows of celibacy because of to the Lord.", BECAUSE_OF,
     "Isaac condemned vows of celibacy because of the Lord."),
    ("They were executed because of they were accused of heresy.", BECAUSE_OF,
     "They were executed because they were accused of heresy."),
    ("At first what did Mazda think was the main cause of damage to skin cells.", QUESTION_FORM,
     "At first Mazda thought that ozone was the main cause of damage to skin cells."),
    ("Nine Grammy Awards does the text say Rihanna has won.", QUESTION_FORM, "Never had he seen such a storm."),
    ("Which team won the cup in 1990.", QUESTION_FORM, "Doctor Who was last broadcast in 1989."),
    ("Did Mazda think it was the cause.", QUESTION_FORM, "Had he known, he would have stayed."),
    ("Tesla is from Smiljan?", QUESTION_FORM, "When the war ended, he moved to Paris."),
    ("The name of the follower was ennobled Oscar Whitfield by Edward II.", PASSIVE_OBJECT,
     "He was given a book by his uncle."),
    ("In a evolutionary situation, use is described as an transliteration.", ARTICLE,
     "A university gave an honest answer to an FBI agent in an hour."),
    ("Calvin's writings to spread to Paris in 1915.", NO_FINITE, "The decree of 1763 forbade trade with the French."),
])
def test_each_rule_flags_its_broken_sentence_and_not_its_english_twin(res, broken, kind, fine):
    assert kind in grammar_problems(res.parse(broken)), broken
    assert grammar_problems(res.parse(fine)) == [], fine


def test_the_check_needs_the_callers_parser():
    """The attacks' contexts without a parser judge nothing; with one, the check names the kind."""
    from advrace.core.checks import Subject

    subject = Subject(None, "Soulias Morris from is in Paris.")
    assert Grammar().refuse(subject, TextContext(), {}) is None
    why = Grammar().refuse(subject, TextContext(parse_fn=get_resources().parse), {})
    assert why and why.startswith(STRANDED)


@pytest.mark.parametrize("scores, low", [
    ([-6 + 0.05 * i for i in range(-20, 20)] + [-12.0, -7.4], [40]),  # -7.4 is within 3 deviations (0.5)
    # an extreme value does not hide the others, as it would widen a standard deviation
    ([-6 + 0.05 * i for i in range(-20, 20)] + [-30.0, -12.0, -12.0], [40, 41, 42]),
    ([-5.0] * 30 + [-9.0] * 10, []),  # no spread: nothing stands out
])
def test_a_fluency_outlier_is_below_the_median_by_three_median_deviations(scores, low):
    assert A.fluency_outliers(scores)[3] == low


def _split(n: int):
    """n SQuAD questions, each with an inserted sentence (one of them far from English)."""
    context = "Tom lives in Leeds and works in a bakery near the station."
    sources, examples = [], []
    for i in range(n):
        src = SpanExample(id=f"q{i}", title="t", context=context, question="Where does Tom live?",
                          answers=(Answer("Leeds", context.index("Leeds")),))
        sentence = ("Jim village bakery the the of station Leeds in in." if i == 0
                    else f"Jim lives in York and works in shop number {i}.")
        record = AdversarialSentence(sentence, answer="York")
        sources.append(src)
        examples.append(src.insert_sentence(sentence, len(context)).with_provenance(
            AttackSummary("addonesent", sentences=(record,))))
    return sources, examples


def test_a_split_is_scored_by_its_language_model_and_its_rates_reach_the_counts(ctx, tmp_path):
    from transformers import AutoTokenizer
    import transformers as tf

    from advrace.attacks.sentences.fluency import fluency
    from conftest import make_tokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                               pad_token_id=0, bos_token_id=1, eos_token_id=2)).eval()
    scorer = fluency("tiny-audit-lm")
    scorer._loaded = (model, tok, torch.device("cpu"), False)
    sources, examples = _split(A.FLUENCY_MIN)
    audit = A.audit_split("addonesent", sources, examples, ctx, {"fluency_model": "tiny-audit-lm"})
    scores = scorer.scores([ex.provenance[-1].sentences[0].sentence for ex in examples])
    median, mad, floor, low = A.fluency_outliers(scores)
    grammar = audit.counts()["grammar"]
    assert grammar["fluency"] == {"scored": True, "model": "tiny-audit-lm", "median": median, "mad": mad,
                                  "k": A.FLUENCY_K, "threshold": floor}
    assert grammar["by_kind"][FLUENCY] == len(low)
    assert sorted(i for i, _, name, _ in audit.flags if name == FLUENCY) == low
    assert grammar["sentences"] == A.FLUENCY_MIN and grammar["rate"] == grammar["flagged"] / A.FLUENCY_MIN

    fewer = A.audit_split("addonesent", sources[:-1], examples[:-1], ctx, {"fluency_model": "tiny-audit-lm"})
    assert fewer.grammar["fluency"] == {"scored": False, "why": f"{A.FLUENCY_MIN - 1} sentences, fewer than "
                                                                 f"{A.FLUENCY_MIN}"}
    assert FLUENCY not in fewer.grammar["by_kind"]
    missing = A.audit_split("addonesent", sources, examples, ctx, {"fluency_model": str(tmp_path / "no-lm")})
    assert not missing.grammar["fluency"]["scored"] and "could not be loaded" in missing.grammar["fluency"]["why"]
    unnamed = A.audit_split("addonesent", sources, examples, ctx, {"answer_model": ""})
    assert "no language model" in unnamed.grammar["fluency"]["why"]


def test_the_card_gives_the_grammar_rate_per_split_and_kind():
    from advrace.release.card import audit_lines, grammar_lines

    audit = {"addonesent": {"checked": 4, "flagged": 1, "by_check": {}, "unchecked": [],
                            "grammar": {"sentences": 4, "flagged": 1, "rate": 0.25,
                                        "by_kind": {STRANDED: 1, QUESTION_FORM: 0},
                                        "fluency": {"scored": False, "why": "4 sentences, fewer than 40"}}},
             "charswap": {"checked": 4, "flagged": 0, "by_check": {}, "unchecked": []}}
    lines = grammar_lines(audit)
    assert f"| split | sentences | flagged | {STRANDED} | {QUESTION_FORM} |" in lines
    assert "| addonesent | 4 | 1 (25.0%) | 1 | 0 |" in lines
    assert "- `addonesent`: fluency outliers not scored: 4 sentences, fewer than 40." in lines
    assert not any("charswap" in line for line in lines)
    assert "| addonesent | 4 | 1 (25.0%) | 1 | 0 |" in audit_lines(audit, False)  # the card's audit section
