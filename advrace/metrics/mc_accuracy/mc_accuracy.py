"""Multiple-choice accuracy in percent: the share of questions whose predicted option is gold."""

import datasets
import evaluate

_DESCRIPTION = "Percentage of predicted option indices equal to the gold option index."

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted option index per question (-1 for no answer).
    references (list of int): gold option index per question.
Returns:
    accuracy (float): 100 * correct / total.
Examples:
    >>> metric = evaluate.load("advrace/metrics/mc_accuracy")
    >>> metric.compute(predictions=[1, 0, 3], references=[1, 2, 3])
    {'accuracy': 66.66666666666667}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class McAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references):
        if not references:
            return {"accuracy": 0.0}
        correct = sum(int(p) == int(r) for p, r in zip(predictions, references))
        return {"accuracy": 100.0 * correct / len(references)}
