"""The dataset card (`README.md`): Hub metadata, the splits with their hashes and attacked shares,
how the model-dependent ones were made, and the data's own licence.

Everything it says about the data comes from the manifest's source (what was read), never from
the recipe's free text: a recipe's description is printed only when the release was built from the
recipe's own data (`description_lines`)."""

from __future__ import annotations

from pathlib import Path

from advrace.core.config import SAMPLE_PREFIX, ReleaseConfig
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.formats.base import canonical_part, part_words
from advrace.metrics.human_rates import RATES, kappa_text, percent_ci, validation_summary
from advrace.release.licence import SAMPLE, hub_metadata, licence_lines
from advrace.release.records import NO_ATTACK


def named_parts(text: str) -> set[str]:
    """The data set's parts a recipe's free text names (`advrace-race-test`, "the RACE test set")."""
    return {canonical_part(w) for w in part_words(text)}


def _read_parts(part: str) -> set[str]:
    return {canonical_part(p) for p in part.split("+")}


def contradicts(text: str, part: str | None) -> bool:
    """Whether `text` names a part other than the one read (never when the read one is unknown)."""
    return bool(part) and bool(named_parts(text) - _read_parts(part))


def source_line(src: dict, task: str) -> str:
    """What was read, from the data rather than the recipe: its split (from its folder and file
    names), RACE levels (from its ids), and how many questions on how many passages."""
    parts = [f"`{src['name']}` ({src['format']})"]
    if "split" in src:
        parts.append(f"the **{src['split']}** split" if src["split"]
                     else "a split its folder and file names do not name")
    if src.get("levels"):
        parts.append("RACE " + " and ".join(src["levels"]) + " school")
    count = plural(src["kept"], "question")
    if src.get("passages") is not None:
        count += f" on {plural(src['passages'], 'passage' if task == MULTIPLE_CHOICE else 'paragraph')}"
    chosen = src.get("selection") or {}
    if chosen.get("method") == "sample":
        count += (f" (a random sample, seed {chosen['seed']}, of the {chosen['from']:,} read, whole "
                  "passages kept together" + (", levels in their shares)" if chosen.get("by_level") else ")"))
    elif chosen.get("method") == "first":
        count += f" (the source's first {chosen['questions']:,})"
    return f"Source: {', '.join(parts)}; {count}; source fingerprint `{src['fingerprint'][:16]}`."


def _recipe_note(cfg: ReleaseConfig, part: str | None) -> list[str]:
    """A recipe reused on other data (race-test.yaml with --data RACE/dev) keeps its name, so
    the card says that the name is wrong and leaves a wrong description out (a description of the
    recipe's own data, when other data was read, is left out by `description_lines`, which says so)."""
    told = (("name", cfg.name), ("description", cfg.description)) if cfg.reads_recipe_data else (("name", cfg.name),)
    clash = [(what, text) for what, text in told if contradicts(text, part)]
    if not clash:
        return []
    others = sorted(set().union(*(named_parts(text) for _, text in clash)) - _read_parts(part))
    subject = " and ".join(f"name (`{cfg.name}`)" if what == "name" else "description" for what, _ in clash)
    return [f"The recipe's {subject} {'name' if len(clash) > 1 else 'names'} the {' and '.join(others)} "
            f"split, but the data read is the **{part}** split: this card describes what was read"
            + (", without that description" if clash[-1][0] == "description" else "") + ".", ""]


# The papers each attack follows, by task: a card cites only those of its own splits.
ADVRACE = "AdvRACE (Si et al., Findings of ACL 2021)"
ADV_SQUAD = "Adversarial SQuAD (Jia and Liang, EMNLP 2017)"
PAPERS = {  # by the attacks' own names; a split's alias ("addsent") is resolved by the release's task
    MULTIPLE_CHOICE: {"mc_addsent": ADVRACE, "charswap": ADVRACE, "distractor_extraction": ADVRACE,
                      "distractor_generation": ADVRACE, "diagnosis": ADVRACE, "option_only": ADVRACE},
    EXTRACTIVE_QA: {"charswap": "AdvRACE's CharSwap (Si et al., Findings of ACL 2021)", "squad_addsent": ADV_SQUAD,
                    "addonesent": ADV_SQUAD, "addsentmod": ADV_SQUAD, "addany": ADV_SQUAD, "addcommon": ADV_SQUAD},
}
PROBES = {"diagnosis": "inserts the question and its correct answer into the passage, so a model that reads "
                       "should gain on it",
          "option_only": "removes the passage and the question, to measure what the options alone give away"}


def description_lines(cfg: ReleaseConfig, src: dict) -> list[str]:
    """The recipe's description, printed only where it describes the data read: when the release
    was built from the recipe's own `data.path` (not data `--data` put in its place) and it names
    no other split than the one read. Otherwise a description made from the source, and a note
    saying why the recipe's is left out."""
    if not cfg.description:
        return []
    if cfg.reads_recipe_data and not contradicts(cfg.description, src.get("split")):
        return [cfg.description.strip(), ""]
    made = f"Adversarial splits of {_data_name(src)}."
    if cfg.reads_recipe_data:
        return [made, ""]  # the description names another split: _recipe_note says so
    return [made, "", f"The recipe `{cfg.name}` names its own data (`{_where(cfg.recipe_data)}`); this release was "
                      "built from data given in its place, so it keeps the recipe's name but not its description: "
                      "this card describes the data read.", ""]


def _where(path: str) -> str:
    """A recipe's data by name, without the folders it sat in (as the manifest names data)."""
    return path if path.startswith(SAMPLE_PREFIX) else (Path(path.rstrip("/")).name or path)


def _data_name(src: dict) -> str:
    dataset = src.get("dataset")
    if dataset == SAMPLE:
        return f"advrace's bundled sample (`{src['name']}`)"
    return dataset or f"`{src['name']}`"


def attacked_share(manifest: dict) -> list[str]:
    """How many of each attacked split's questions the attack changed: the rest are copies of the
    original, and a score over all of them is diluted by those copies."""
    attacked = [(split, info) for split, info in manifest["splits"].items() if info["attack"] != NO_ATTACK]
    if not attacked:
        return []
    dropped = (manifest.get("validation") or {}).get("invalid") == "dropped"
    lines = ["## Attacked share", "",
             ("Every split has the same questions as `original`, except those people judged invalid, dropped "
              "from the validated splits" if dropped else "Every split has the same questions as `original`")
             + ": a question its attack could not change stays in it as an unchanged copy of the original.", ""]
    for split, info in attacked:
        n, m = info["perturbed"], info["count"]
        lines.append(f"- `{split}`: attacked: {n:,} of {plural(m, 'question')} ({100 * n / m if m else 0:.1f}%)")
    lines += ["", "A score over all of a split's questions dilutes the attack by those copies; "
                  "`advrace evaluate` reports the score on the attacked questions too.", ""]
    return lines


def _method_lines(manifest: dict, task: str) -> list[str]:
    """The papers the release's attacks follow, and what its probe splits are: its own splits only."""
    from advrace.attacks import canonical_name  # deferred for start-up time: importing the attacks loads every attack module

    papers: dict[str, list[str]] = {}
    for split, info in manifest["splits"].items():
        paper = PAPERS.get(task, {}).get(canonical_name(info["attack"], task))
        if paper and info["attack"] not in PROBES:
            papers.setdefault(paper, []).append(f"`{split}`")
    lines = [f"{', '.join(splits)} follow{'s' if len(splits) == 1 else ''} {paper}."
             for paper, splits in papers.items()]
    probes = [(split, info["attack"]) for split, info in manifest["splits"].items() if info["attack"] in PROBES]
    lines += [f"`{split}` is a probe, not an attack (AdvRACE, appendix D.2): it {PROBES[attack]}."
              for split, attack in probes]
    return ["", " ".join(lines)] if lines else []


def dataset_card(cfg: ReleaseConfig, manifest: dict, stats: dict) -> str:
    task = manifest["task"]
    src = manifest["source"]
    mc = task == MULTIPLE_CHOICE
    lines = ["---", f"pretty_name: {cfg.name}", *hub_metadata(src), "configs:", "- config_name: default",
             "  data_files:"]
    for split, info in manifest["splits"].items():
        lines += [f"  - split: {split}", f"    path: {info['file']}"]
    lines += ["---", "", f"# {cfg.name}", ""]
    lines += description_lines(cfg, src)
    lines += [
        f"A frozen adversarial benchmark release for {'multiple-choice' if mc else 'extractive'}"
        f" reading comprehension, built with advrace {manifest['advrace_version']}.",
        "",
        source_line(src, task),
        "",
        *_recipe_note(cfg, src.get("split")),
        "| split | attack | questions | perturbed | words changed | words removed | sha256 |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for split, info in manifest["splits"].items():
        s = stats["splits"][split]
        lines.append(f"| {split} | {info['attack']} | {info['count']} | {info['perturbed']} | "
                     f"{100 * s['words_changed']:.1f}% | {100 * s.get('words_removed', 0.0):.1f}% | "
                     f"`{info['sha256'][:16]}` |")
    removes = [f"`{split}`" for split, info in manifest["splits"].items() if info["attack"] == "option_only"]
    lines += ["", "Words changed: words substituted or inserted; words removed: words deleted"
                  + (f" ({', '.join(removes)} removes the passage and the question)" if removes else "")
                  + f"; both as a share of the source's {'passage' if mc else 'context'} and question words."]
    dependent = [(split, info) for split, info in manifest["splits"].items() if "checkpoint_sha256" in info]
    if dependent:
        lines += [""]
        for split, info in dependent:
            kind = "model-dependent" if info.get("model_dependent") else "built with a model"
            sha, run = info.get("checkpoint_sha256"), info.get("inference")
            lines.append(f"- `{split}` is {kind}: made with the checkpoint `{info['config'].get('model', '')}`"
                         + (f" (sha256 `{sha[:16]}`)" if sha else "")
                         + (f", run in {run['precision']} on {run['device_type']} with torch {run['torch']}"
                            if run else "")
                         + _selection(info.get("select_with"))
                         + "; its difficulty for other models is measured, not guaranteed.")
            if info.get("trained_on_sample"):
                lines.append(f"  The checkpoint was trained on the bundled sample (`{info['trained_on_sample']}`), "
                             f"as `make demo` trains it: {DEMONSTRATION}. Train real models with "
                             "`configs/train/de-gpu.yaml` (extraction) or `configs/train/dg-gpu.yaml` "
                             "(generation) on RACE train.")
    lines += ["", *attacked_share(manifest), *validation_lines(manifest.get("validation"))]
    lines += [
        "Load it with `datasets.load_dataset(\"json\", data_dir=\"<this folder>\")` or "
        "`datasets.load_dataset(\"<this folder>\")`; check it with `advrace verify <this folder>`.",
        "Every record keeps its `source_id` and a `provenance` list of what was changed and where.",
    ]
    if manifest["source"]["skipped"]:
        lines += ["", f"{len(manifest['source']['skipped'])} malformed source records were skipped "
                      "(`--lenient`); `manifest.json` lists them."]
    lines += _method_lines(manifest, task)
    lines += ["", "## Licence", "", *licence_lines(src), ""]
    lines += audit_lines(stats.get("audit"), cfg.drop_flagged)
    return "\n".join(lines)


DEMONSTRATION = "a demonstration model, far too weak for a benchmark, so this split shows the pipeline and measures nothing"


def split_models(info: dict) -> list[dict]:
    """The models a split was made with, as its manifest entry records them: the attack's own
    checkpoint (`generator`), its answerability `judge` and the `reader`(s) that chose its
    distractors, each {role, name, checkpoint_sha256, trained_from} (what is recorded)."""
    found = []
    if "checkpoint_sha256" in info:
        found.append({"role": "generator", "name": (info.get("config") or {}).get("model"),
                      "checkpoint_sha256": info.get("checkpoint_sha256"), "trained_from": info.get("trained_from")})
    if isinstance(info.get("judge"), dict):
        found.append({"role": "judge", **{k: info["judge"].get(k) for k in ("name", "checkpoint_sha256", "trained_from")}})
    chosen = info.get("select_with")
    if isinstance(chosen, dict):
        for reader in chosen.get("readers") or [chosen]:
            found.append({"role": "reader", **{k: reader.get(k) for k in ("name", "checkpoint_sha256", "trained_from")}})
    return found


def validation_lines(validation: dict | None) -> list[str]:
    """What people's validation (`advrace human-eval validate`) found per split, and what became
    of the questions they judged invalid."""
    if not validation:
        return []
    source, study = validation["source_release"], validation["study"]
    lines = ["## Validated by people", "",
             f"Made from the release `{source['name']}` (manifest sha256 `{source['manifest_sha256'][:16]}`) by "
             f"a study of every question the attacks below changed: {plural(study['annotators'], 'annotator')}"
             + (f", {plural(study['judgements'], 'judgement')} per question" if study.get("judgements") else "")
             + f"; annotations sha256 "
             f"`{study['annotations_sha256'][:16]}`. {RATES}", ""]
    for split in validation["splits"]:
        lines.append(f"- `{split}`: {validated_split_text(validation, split)}.")
    lines += ["", *quality_control_lines(validation),
              "Each validated question's `provenance` ends with its votes (a `validated` record)"
              + (", or with people's edits, their verifiers' votes and which edit it holds and why (a "
                 "`people_edited` record)" if any(v.get("mended") or v.get("candidates")
                                                  for v in validation["splits"].values()) else "")
              + ".", ""]
    lines += [f"**{line}**" for line in validation.get("warnings") or ()] + ([""] if validation.get("warnings") else [])
    return lines


def quality_control_lines(validation: dict) -> list[str]:
    """Whether one annotator could see two versions of a question, and who was excluded for
    accuracy on control questions (`advrace human-eval create --controls`)."""
    lines = []
    apart = validation["study"].get("versions_apart")
    if apart is not None:
        lines.append("Two versions of one question never went to one annotator." if apart else
                     "One annotator could judge several versions of one question (the study allowed it).")
    checks = validation.get("controls")
    if checks:
        out = ", ".join(f"{e['annotator']} ({100 * e['accuracy']:.0f}% of {e['controls']})" for e in checks["excluded"])
        lines.append(f"Control questions (original questions with a known answer) made up about "
                     f"{100 * checks['rate']:.0f}% of each queue; annotators below {checks['min_accuracy']} accuracy "
                     f"on them were excluded from the votes: {out or 'none'}. A verdict with excluded votes is over "
                     "the votes that count.")
    return [*lines, ""] if lines else []


def validated_split_text(validation: dict, split: str) -> str:
    """What people's validation found on one split, as the card, `advrace human-eval validate` and
    the evaluation report say it."""
    v = validation["splits"][split]
    if v.get("kind") == "edit":
        return f"finished by people: {people_edit_text(v, validation['invalid'] == 'dropped')}"
    return (f"validated by people: {validation_summary(v)}; {validation_fate(v, validation['invalid'] == 'dropped')}"
            + (f"; **{plural(v['unjudged'], 'changed question')} not yet judged, left as they were "
               "(marked unvalidated in provenance)**" if v["unjudged"] else "") + after_people_text(v))


def after_people_text(v: dict) -> str:
    """The share attacked after people and the share mended (validations since people could mend)."""
    if "attacked_share" not in v:
        return ""
    text = f"; attacked after people: {share_text(v['kept'], v['size'])}"
    if v.get("mended") or v.get("candidates"):
        text += f", mended: {share_text(v['mended'], v['size'])}"
    if v.get("candidates"):
        text += f"; {approval_text(v)}"
    if v.get("replaced_gold"):
        text += f"; {plural(v['replaced_gold'], 'mend')} of the gold option left out"
    return text


def share_text(n: int, m: int) -> str:
    return f"{n:,} of {m:,} ({100 * n / m if m else 0:.1f}%)"


def approval_text(v: dict) -> str:
    """How people's rewrites fared with their verifiers: "4 of 6 verified approved (66.7%, 95% CI ...), kappa 0.4"."""
    return (f"{plural(v['candidates'], 'edit')} made ({v['beyond_repair']:,} beyond repair), {v['approved']:,} of "
            f"{v['verified']:,} verified approved ({percent_ci(v['approval_rate'], v['approval_ci'])}), verifiers' "
            f"kappa {kappa_text(v['verify_kappa'])}")


def people_edit_text(v: dict, dropped: bool) -> str:
    """A split whose machine sentences people edited and verified (`human-eval validate`)."""
    chosen = v["chosen"]
    how = ", ".join(f"{n:,} {what}" for what, n in (("by a seeded draw", chosen["random"]),
                                                    ("worst for the adversary", chosen["worst"]),
                                                    ("the only approved", chosen["only"])) if n)
    return (f"{share_text(v['kept'], v['size'])} attacked after people, {v['mended']:,} of them with an approved edit"
            + (f" ({how})" if how else "") + f"; {approval_text(v)}; "
            + f"{plural(v['back'], 'changed question')} without an approved edit "
            + ("dropped from the split" if dropped else "put back as in its source split (unperturbed)")
            + (f"; {plural(v['with_source'], 'more question')} with its source split's question" if v["with_source"] else "")
            + (f"; **{plural(v['unvalidated'], 'changed question')} with edits not yet verified, left as the machine "
               "made them**" if v["unvalidated"] else ""))


def validation_fate(v: dict, dropped: bool) -> str:
    """What became of a split's questions judged invalid, and of those that went with their source
    split's question."""
    verb = "dropped" if dropped else "put back"
    fate = verb
    if v.get("mended") or v.get("undecided"):
        fate = (f"{v.get('mended', 0):,} of them kept with people's mend, "
                + (f"{v['undecided']:,} with mends not yet verified left as the machine made them, "
                   if v.get("undecided") else "") + f"{v['invalid'] - v.get('mended', 0) - v.get('undecided', 0):,} {verb}")
    return (f"{v['invalid']:,} judged invalid, {fate}"
            + (" from the split" if dropped else " as in its source split (unperturbed)")
            + (f"; {plural(v['with_source'], 'more question')} {verb} with its source split's question"
               if v.get("with_source") else ""))


def _selection(reader: dict | None) -> str:
    """How the distractors were chosen when a reader picked them (SWAG's adversarial filtering)."""
    if not reader:
        return ""
    if reader.get("readers"):
        names = ", ".join(f"`{r['name']}`" for r in reader["readers"])
        return (f", its distractors chosen as those the readers {names} rank highest together, so those "
                "readers' drops on it are adversarial by construction")
    sha = reader.get("checkpoint_sha256")
    return (f", its distractors chosen as those the reader `{reader['name']}`"
            + (f" (sha256 `{sha[:16]}`)" if sha else "") + " scores highest, so that reader's drop on it "
            "is adversarial by construction")


def audit_lines(audit: dict | None, dropped: bool) -> list[str]:
    """The audit's counts per split, and a warning for each split it flagged."""
    if not audit:
        return []
    lines = ["## Audit", "",
             "`advrace audit` checks that every question keeps its gold answer the one right answer "
             "(advrace's documentation: docs/audit.md); `advrace audit <this folder> --details` lists the "
             "flagged questions.", "",
             "| split | checked | flagged | checks that flagged |", "|---|---:|---:|---|"]
    for split, a in audit.items():
        found = ", ".join(f"{check}: {n}" for check, n in a["by_check"].items()) or "none"
        lines.append(f"| {split} | {a['checked']} | {a['flagged']} | {found} |")
    lines += grammar_lines(audit)
    flagged = [(split, a) for split, a in audit.items() if a["flagged"]]
    unchecked = [(split, a["unchecked"]) for split, a in audit.items() if a.get("unchecked")]
    if flagged or unchecked:
        lines.append("")
    for split, kinds in unchecked:
        lines.append(f"- `{split}`: the audit does not see {'; nor '.join(kinds)}. Validate it with "
                     "`advrace human-eval` before publishing results on it.")
    for split, a in flagged:
        if dropped:
            lines.append(f"- `{split}`: the audit flagged {plural(a['flagged'], 'question')}; they are left as in the "
                         "source split (unperturbed, with the reason in the stats).")
        else:
            lines.append(f"- **`{split}`: the audit flagged {a['flagged']:,} of {plural(a['checked'], 'question')}**; "
                         "their gold answer may not be the one right answer. Rebuild with "
                         "`--drop-flagged` to leave them unchanged.")
    return lines + [""]


def grammar_lines(audit: dict) -> list[str]:
    """The grammar check's rate per split and per kind of problem over the inserted sentences
    (stats.json's `audit.SPLIT.grammar`), and whether a language model scored their fluency."""
    rows = {split: a["grammar"] for split, a in audit.items() if a.get("grammar") and a["grammar"]["sentences"]}
    if not rows:
        return []
    kinds = list(dict.fromkeys(k for g in rows.values() for k in g["by_kind"]))
    lines = ["", "Grammar of the inserted sentences (docs/audit.md, 'Grammar'): the share of sentences the "
             "grammar check flags, by kind of problem (a sentence may have several).", "",
             "| split | sentences | flagged | " + " | ".join(kinds) + " |",
             "|---|---:|---:|" + "---:|" * len(kinds)]
    for split, g in rows.items():
        cells = [str(g["by_kind"][k]) if k in g["by_kind"] else "-" for k in kinds]
        lines.append(f"| {split} | {g['sentences']} | {g['flagged']} ({g['rate']:.1%}) | " + " | ".join(cells) + " |")
    lines.append("")
    for split, g in rows.items():
        f = g["fluency"]
        lines.append(f"- `{split}`: fluency outliers scored under {f['model']} (below the split's median "
                     f"{f['median']:.3g} less {f['k']:g} median absolute deviations, {f['mad']:.3g})" if f["scored"]
                     else f"- `{split}`: fluency outliers not scored: {f['why']}.")
    return lines
