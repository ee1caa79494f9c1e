"""SQuAD v1.1 exact match and F1 in percent, with the official answer normalisation."""

import datasets
import evaluate

from advrace.metrics import squad_em_f1

_DESCRIPTION = ("SQuAD v1.1 (Rajpurkar et al., 2016): answers are lowercased and stripped of "
                "punctuation and the articles a/an/the; EM and token F1 take the best gold answer "
                "per question and are averaged over questions.")

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the predicted answer text per question.
    references (list of list of str): the gold answer texts per question.
Returns:
    exact_match (float): 100 * mean over questions of the best exact match.
    f1 (float): 100 * mean over questions of the best token F1.
Examples:
    >>> metric = evaluate.load("advrace/metrics/squad_v11")
    >>> metric.compute(predictions=["the Black Sea"], references=[["Black Sea"]])
    {'exact_match': 100.0, 'f1': 100.0}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SquadV11(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Sequence(datasets.Value("string"))}),
        )

    def _compute(self, predictions, references):
        if not references:
            return {"exact_match": 0.0, "f1": 0.0}
        em = f1 = 0.0
        for prediction, golds in zip(predictions, references):
            e, f = squad_em_f1(prediction, golds)
            em += e
            f1 += f
        n = len(references)
        return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}
