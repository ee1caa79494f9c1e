"""Human evaluation: sampling, the annotation and authoring web app, agreement (issue 7)."""
