"""Human evaluation of releases and human-in-the-loop adversarial authoring.

`study` samples a release into a study database (`store`, which holds every SQL statement), or
takes every question its attacks changed, which `validate` turns into a validated release;
`editing` has people rewrite SQuAD's machine sentences and `verifying` has others verify the
edits blind (Jia and Liang's crowd step);
`server` is the web app for annotators and authors (its pages are Jinja2 templates in
templates/), `report` computes valid and correct rates, human F1 and agreement, `authoring`
(multiple choice) and `span_authoring` (SQuAD) compute the model's live predictions,
`importance` the word importance both pages show, and `drafts` checks what both accept. The
command line is `advrace human-eval` (`cli`).
"""
