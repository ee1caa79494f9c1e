"""An article's questions scored over one cached copy of the article (a tree row: each question's
rest sees the article, each option its question and the article) give what each (prompt, option)
pair run alone gives, on tiny random configs of every kind the fast path claims: Llama (SDPA and
eager), GPT-2 (learned absolute positions), Mistral and Qwen2 with a sliding window shorter than
the row, and a model whose attention handles block-diagonal packing only, whose tree probe fails
(groups split, counted). The cases a wrong implementation gets wrong: questions of different
lengths in one row, and an article whose last token merges with the question's first one."""

import pytest
import torch

from advrace.models.decoders.continuation_scoring import PrefixSharing, shared_logprobs
from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.decoders.packed_scoring import Request, shared_prefix, unshared_logprobs

from test_decoder_families import VOCAB, WINDOW, _gap
from test_decoder_families import _config as family_config

pytestmark = pytest.mark.usefixtures("one_thread")


def _config(family: str):
    """test_decoder_families' configs, and a Qwen2 whose every layer slides (its own switch)."""
    if family != "qwen2":
        return family_config(family)
    config = family_config("qwen2")
    config.use_sliding_window, config.sliding_window, config.max_window_layers = True, WINDOW, 0
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    return config


CASES = [(f, impl) for f in ("llama", "gpt2", "mistral", "qwen2") for impl in ("eager", "sdpa")]


def tiny(family: str, impl: str, cls=None):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    if cls is not None:
        return cls._from_config(_config(family), attn_implementation=impl).eval()
    return AutoModelForCausalLM.from_config(_config(family), attn_implementation=impl).eval()


def articles(seed: int = 0, sizes=(8, 5, 3)):
    """Requests and their groups: articles of `sizes` tokens, each with questions of 0-4 more
    tokens (so a row holds questions of different lengths, one of them the article alone) and
    1-4 options of 1-3 tokens; every pair fits the window."""
    g = torch.Generator().manual_seed(seed)

    def ids(n):
        return tuple(torch.randint(3, VOCAB, (n,), generator=g).tolist())

    reqs, groups = [], []
    for size in sizes:
        article, group = ids(size), []
        for rest, n in ((3, 2), (1, 3), (4, 1), (0, 2)):
            group.append(len(reqs))
            reqs.append(Request(article + ids(rest), tuple(ids(1 + (k + rest) % 3) for k in range(n))))
        groups.append(group)
    assert max(r.longest for r in reqs) <= WINDOW
    return reqs, groups


@pytest.mark.parametrize("family,impl", CASES)
def test_an_article_shared_by_its_questions_scores_as_each_pair_alone(family, impl):
    model = tiny(family, impl)
    core = PackedCore(model)
    sharing = PrefixSharing(core)
    assert sharing.enabled and sharing.probe == {"gap_below_tolerance": True}
    assert core.limit == (WINDOW if family in ("mistral", "qwen2") else None)
    reqs, groups = articles()
    rows = [sum(len(r.context) - len(shared_prefix([reqs[i] for i in g])) - 1 +
                sum(len(c) for c in r.continuations) for r in (reqs[i] for i in g)) for g in groups]
    assert max(rows) + 8 > WINDOW  # the article and its questions' row: longer than a window
    with torch.inference_mode():
        got = shared_logprobs(model, reqs, core=core, groups=groups, sharing=sharing)
        reference = unshared_logprobs(model, reqs)
        one_article = shared_logprobs(model, reqs[:4], core=core, groups=[[0, 1, 2, 3]], sharing=sharing)
    assert _gap(got, reference) < 1e-4
    assert _gap(one_article, reference[:4]) < 1e-4  # a question's scores do not depend on its batch
    assert len({round(v, 3) for row in got for v in row}) > 20
    assert sharing.record()["questions"] == 12 + 4 and sharing.record()["groups"] == 3 + 1
    # a question that is its article alone keeps its last token: each article shares one less
    assert sharing.record()["prefix_tokens_saved"] == 3 * (7 + 4 + 2) + 3 * 7


def test_a_question_longer_than_the_window_leaves_its_article_group_and_runs_alone():
    model = tiny("mistral", "sdpa")
    core = PackedCore(model)
    sharing = PrefixSharing(core)
    reqs, groups = articles(sizes=(8,))
    long = Request(reqs[0].context + tuple(range(3, 3 + WINDOW)), ((5, 6),))
    reqs.append(long)
    groups[0].append(len(reqs) - 1)
    with torch.inference_mode():
        got = shared_logprobs(model, reqs, core=core, groups=groups, sharing=sharing)
        reference = unshared_logprobs(model, reqs)
    assert _gap(got, reference) < 1e-4
    assert core.unshared.reasons == {f"sliding window of {WINDOW} tokens": 1} and sharing.questions == 4


def test_the_shared_prefix_is_the_common_tokens_whatever_the_article_was_tokenised_as():
    """An article whose last token merges with its question's first (a BPE merge across the
    boundary): the questions' prompts part one token before the article's end, and only what
    they have in common is shared, never the article's tokens as tokenised alone."""
    g = torch.Generator().manual_seed(5)

    def ids(n):
        return tuple(torch.randint(3, VOCAB, (n,), generator=g).tolist())

    article = ids(9)
    # the article alone ends with token 10; in the second prompt its last characters and the
    # question's first are one token, 11
    plain = Request(article + (10,) + ids(3), (ids(2), ids(1)))
    glued = Request(article + (11,) + ids(2), (ids(1), ids(3)))
    assert shared_prefix([plain, glued]) == article
    model = tiny("llama", "sdpa")
    core = PackedCore(model)
    sharing = PrefixSharing(core)
    with torch.inference_mode():
        got = shared_logprobs(model, [plain, glued], core=core, groups=[[0, 1]], sharing=sharing)
        reference = unshared_logprobs(model, [plain, glued])
    assert _gap(got, reference) < 1e-4
    assert sharing.record()["groups"] == 1 and sharing.record()["prefix_tokens_saved"] == len(article)


def test_identical_prompts_in_one_group_each_keep_their_last_token():
    reqs, _ = articles(sizes=(6,))
    twin = Request(reqs[0].context, ((7,), (8, 9)))
    assert shared_prefix([reqs[0], twin]) == reqs[0].context[:-1]
    model = tiny("llama", "eager")
    core = PackedCore(model)
    sharing = PrefixSharing(core)
    with torch.inference_mode():
        got = shared_logprobs(model, [reqs[0], twin], core=core, groups=[[0, 1]], sharing=sharing)
        reference = unshared_logprobs(model, [reqs[0], twin])
    assert _gap(got, reference) < 1e-4 and sharing.questions == 2


def _contiguous_only(mask):
    """A 4D boolean mask as an attention that packs sequences back to back (varlen kernels) reads
    it: a query sees the prefix slots it is given and the unbroken run of keys ending at itself,
    nothing before a gap."""
    width = mask.shape[-1] - mask.shape[-2]
    own = mask[..., width:]
    q = own.shape[-1]
    later = torch.arange(q).view(1, -1) > torch.arange(q).view(-1, 1)  # key after query
    run = torch.where(later, True, own).flip(-1).int().cumprod(-1).flip(-1).bool() & ~later
    return torch.cat([mask[..., :width], run], dim=-1)


def test_a_model_that_packs_only_back_to_back_fails_the_tree_probe_and_splits_counted():
    """Its attention passes the per-question probe (options back to back) but cannot see a
    question's tokens from its options across the other options: the tree probe fails, every
    article's questions are scored each over its own prompt, exact, and counted."""
    from transformers import LlamaForCausalLM

    class BackToBack(LlamaForCausalLM):
        def forward(self, *args, attention_mask=None, **kwargs):
            if attention_mask is not None and attention_mask.dim() == 4:
                attention_mask = _contiguous_only(attention_mask)
            return super().forward(*args, attention_mask=attention_mask, **kwargs)

    model = tiny("llama", "sdpa", cls=BackToBack)
    core = PackedCore(model)
    assert core.limit is None and core.probe["passed"]
    sharing = PrefixSharing(core)
    assert not sharing.enabled and sharing.probe == {"gap_below_tolerance": False}
    assert sharing.reason.startswith("shared-prefix probe")
    reqs, groups = articles()
    with torch.inference_mode():
        got = shared_logprobs(model, reqs, core=core, groups=groups, sharing=sharing)
        reference = unshared_logprobs(model, reqs)
    assert _gap(got, reference) < 1e-4
    assert sharing.record()["questions_not_grouped"] == {sharing.reason: 12} and sharing.questions == 0
    assert core.unshared.shared == 12


@pytest.mark.parametrize("family,impl", CASES)
def test_with_bf16_forced_on_an_article_shared_scores_as_each_pair_alone_in_bf16(family, impl):
    """bf16 on (autocast, as `bf16: true` scores) as well as off: the tree row over the cached
    article gives what each pair alone gives in bf16, within bf16's own rounding (the two paths
    add in other orders), and bf16 did take effect."""
    model = tiny(family, impl)
    core = PackedCore(model)
    sharing = PrefixSharing(core)
    reqs, groups = articles()
    with torch.inference_mode():
        fp32 = unshared_logprobs(model, reqs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = shared_logprobs(model, reqs, core=core, groups=groups, sharing=sharing)
            alone = unshared_logprobs(model, reqs)
    assert _gap(alone, fp32) > 1e-4  # bf16 was on
    assert _gap(got, alone) < 5e-3
    assert sharing.record()["groups"] == 3
