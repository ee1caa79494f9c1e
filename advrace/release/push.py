"""`advrace push`: share a verified release as a Hugging Face Hub dataset repo.

A release is already laid out for the Hub (split files under data/ with the Hub's names, a card
whose YAML header lists them), so pushing is one folder upload. It verifies the release first,
since a release that no longer matches its manifest would publish checksums that lie, and it
uploads exactly the files the manifest lists.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import re
import textwrap
from pathlib import Path

from advrace.core.errors import AdvraceError, ConfigError, ResourceMissing, VerifyError
from advrace.core.text import plural
from advrace.release.verify import check_release

REPO_TYPE = "dataset"
# The release's own folders: a file in them that this release lacks (a split of an older push)
# is deleted from the repo, so the repo holds this release and not a mix of two.
OWNED_FOLDERS = ("data/*", "squad/*")
REPO_ID_RE = re.compile(r"[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9])?",
                        re.ASCII)
LOGIN_HINT = "log in with `hf auth login` (a token with write access) or set HF_TOKEN, then run again"
NETWORK_HINT = "check the network (and HTTPS_PROXY or HF_ENDPOINT if you set them), then run again"
OFFLINE = ("HF_HUB_OFFLINE is set, so huggingface_hub makes no network call; unset HF_HUB_OFFLINE "
           f"(and TRANSFORMERS_OFFLINE), {NETWORK_HINT}")

EPILOG = textwrap.dedent("""\
    examples:
      advrace push releases/race-test alice/advrace-race-test --dry-run   # what would go, offline
      advrace push releases/race-test alice/advrace-race-test --private
      advrace push releases/race-test my-lab/advrace-race-test --branch v1.1 --message "Rebuilt with seed 7"

    The release is verified first (as `advrace verify` does) and refused if it fails. Exactly
    the files its manifest lists are uploaded (split files, stats.json, README.md,
    manifest.json); files under data/ and squad/ in the repo that this release lacks are
    deleted, other files in the repo are left alone. The card's YAML header lists the splits,
    so afterwards `datasets.load_dataset("alice/advrace-race-test")` gives one split per attack.
    Log in once with `hf auth login` (or set HF_TOKEN); --token overrides both but stays in
    your shell history.
    Exit status: 0 on success, 1 if the release fails verification, 2 on a bad repo id or
    release path, 3 if huggingface_hub is not installed, 4 if the Hub cannot be reached or
    refuses the upload.
    """)


class PushError(AdvraceError):
    """The Hub could not be reached or refused the upload; the message says what to do."""

    exit_code = 4


def upload_plan(release_dir, repo_id: str, *, branch: str | None = None, message: str | None = None) -> dict:
    """What a push would do: the verified release's files (path, bytes) in manifest order, the
    repo, the branch and the commit message. Reads only the release; touches no network."""
    if not REPO_ID_RE.fullmatch(repo_id) or ".." in repo_id or "--" in repo_id or repo_id.endswith(".git"):
        raise ConfigError(f"{repo_id!r} is not a Hub repo id: give OWNER/NAME (your user or organisation, "
                          "then the dataset's name: letters, digits, '-', '_' and '.'), e.g. alice/advrace-race-test")
    try:
        manifest = check_release(release_dir)
    except VerifyError as exc:
        raise VerifyError(f"refusing to push: {exc}\nRebuild the release (or restore its files) until "
                          "`advrace verify` passes.") from None
    root = Path(release_dir)
    files = [(info["file"], info["bytes"]) for info in manifest["splits"].values()]
    files += [(rel, info["bytes"]) for rel, info in manifest["files"].items()]
    manifest_bytes = (root / "manifest.json").read_bytes()  # one read: its size and hash agree
    files.append(("manifest.json", len(manifest_bytes)))
    digest = hashlib.sha256(manifest_bytes).hexdigest()
    return {"release": str(release_dir), "name": manifest["name"], "repo_id": repo_id, "repo_type": REPO_TYPE,
            "branch": branch, "files": files, "bytes": sum(size for _, size in files),
            "message": message or f"Upload {manifest['name']} ({plural(len(manifest['splits']), 'split')}, "
                                  f"manifest sha256 {digest[:16]})"}


def push_release(plan: dict, *, token: str | None = None, private: bool = False) -> str:
    """Create the dataset repo if needed and upload the plan's files in one folder upload; returns
    the commit's URL. Hub failures become a PushError that says what to do next."""
    try:
        from huggingface_hub import HfApi, constants, get_token  # deferred for start-up time: only a push needs it
    except ImportError:
        raise ResourceMissing("pushing to the Hub needs huggingface_hub: pip install huggingface_hub") from None
    repo_id, branch = plan["repo_id"], plan["branch"]
    try:
        if constants.HF_HUB_OFFLINE:
            raise PushError(f"cannot push to {repo_id}: {OFFLINE}")
        if token is None and not get_token():
            raise PushError(f"cannot push to {repo_id}: not logged in to the Hugging Face Hub; {LOGIN_HINT}")
        api = HfApi(token=token)
        api.create_repo(repo_id, repo_type=REPO_TYPE, private=True if private else None, exist_ok=True)
        if private and not api.repo_info(repo_id, repo_type=REPO_TYPE).private:
            raise PushError(f"cannot push to {repo_id}: --private was given, but the repo exists and is public; "
                            "make it private in its settings on the Hub, or drop --private")
        if branch and branch != "main" and not branch.startswith("refs/"):
            api.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
        info = api.upload_folder(repo_id=repo_id, repo_type=REPO_TYPE, folder_path=plan["release"],
                                 revision=branch, commit_message=plan["message"],
                                 allow_patterns=[glob.escape(rel) for rel, _ in plan["files"]],
                                 delete_patterns=list(OWNED_FOLDERS))
    except (AdvraceError, AttributeError, NameError, TypeError):  # ours, or a bug: not the Hub's
        raise
    except Exception as exc:  # every Hub failure leaves the user one of a few fixes; name it
        raise PushError(explain(exc, repo_id)) from None
    return getattr(info, "commit_url", None) or f"{constants.ENDPOINT}/datasets/{repo_id}"


def explain(exc: BaseException, repo_id: str) -> str:
    """A Hub failure as what went wrong and what to do next."""
    kind = type(exc).__name__
    status = getattr(getattr(exc, "response", None), "status_code", None)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else kind
    chain = [exc]
    while (chain[-1].__cause__ or chain[-1].__context__) not in (None, *chain):
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
    names = " ".join(type(e).__name__ for e in chain)
    where = f"cannot push to {repo_id}"
    if "OfflineModeIsEnabled" in names:
        return f"{where}: {OFFLINE}"
    if "LocalTokenNotFound" in names or status == 401:
        return f"{where}: not logged in, or the token is not valid ({first}); {LOGIN_HINT}"
    if status == 403:
        return (f"{where}: the Hub refused the token ({first}); it needs write access to "
                f"{repo_id.split('/')[0]}: {LOGIN_HINT}")
    if status == 404:
        return (f"{where}: not found ({first}); check the repo id and that your token can write to it: "
                f"{LOGIN_HINT}")
    if status is None and (any(isinstance(e, (ConnectionError, TimeoutError)) for e in chain)
                           or re.search(r"Connect|Timeout|Network|Transport|Proxy|Resolution", names)):
        return f"{where}: could not reach the Hugging Face Hub ({kind}: {first}); {NETWORK_HINT}"
    return (f"{where}: the Hub answered {kind}"
            + (f" (HTTP {status})" if status else "") + f": {first}; if it is about access, {LOGIN_HINT}; "
            f"otherwise {NETWORK_HINT}")


def add_push_parser(subparsers):
    """The `advrace push` subcommand; returns its handler."""
    p = subparsers.add_parser(
        "push", help="upload a verified release to a Hugging Face Hub dataset repo (online)",
        description="Verify a release, then upload it as a dataset repo on the Hugging Face Hub, "
                    "creating the repo if it does not exist. --dry-run lists what would be uploaded "
                    "and touches no network.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("release", help="release folder")
    p.add_argument("repo_id", help="the dataset repo, OWNER/NAME (e.g. alice/advrace-race-test)")
    p.add_argument("--dry-run", action="store_true",
                   help="verify and list every file with its size, the repo and the total; upload nothing")
    p.add_argument("--private", action="store_true",
                   help="create the repo private (refused if the repo exists and is public)")
    p.add_argument("--branch", "--revision", dest="branch", metavar="BRANCH",
                   help="push to this branch, created from main if missing (default: main)")
    p.add_argument("--token", help="a Hub token with write access (default: HF_TOKEN, else the login "
                                   "saved by `hf auth login`)")
    p.add_argument("--message", help="the commit message (default: the release's name, split count and "
                                     "manifest sha256)")
    return _push


def _push(args) -> int:
    plan = upload_plan(args.release, args.repo_id, branch=args.branch, message=args.message)
    width = max(len(rel) for rel, _ in plan["files"])
    what = "would upload" if args.dry_run else "uploading"
    print(f"{plan['release']}: verified; {what} {plural(len(plan['files']), 'file')} to the {plan['repo_type']} repo "
          f"{plan['repo_id']}, branch {plan['branch'] or 'main'}"
          + (" (private if created)" if args.private else ""))
    for rel, size in plan["files"]:
        print(f"  {rel:<{width}}  {size:>12,} bytes")
    print(f"  {'total':<{width}}  {plan['bytes']:>12,} bytes in {plural(len(plan['files']), 'file')} "
          f"({plan['bytes'] / 1e6:.1f} MB)")
    if args.dry_run:
        print("dry run: nothing uploaded; files under data/ and squad/ in the repo that this release "
              "lacks would be deleted")
        return 0
    url = push_release(plan, token=args.token, private=args.private)
    print(f"pushed {plan['name']} to {plan['repo_id']}: {url}")
    return 0
