"""Human evaluation of releases and human-in-the-loop adversarial authoring.

`study` samples a release into a study database (`store`, which holds every SQL statement),
`server` is the web app for annotators and authors (its pages are Jinja2 templates in
templates/), `report` computes valid and correct rates, human F1 and agreement, and `authoring`
computes the model's live predictions and word importance. The command line is `advrace
human-eval` (`cli`).
"""
