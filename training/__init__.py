"""Training with Accelerate: fine-tuning, adversarial training and option-only probes (issue 4)."""
