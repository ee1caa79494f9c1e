"""DG's candidates (AdvRACE section 3.2): `beam_size` distractors per question from a generator,
decoded with advrace.models.decoders.beam_search, which runs each source once and shares its
cached keys and values among the beams. Two backends: `unilm`, the UniLM-style seq2seq model of
advrace.models.generators.unilm (the paper's), and `causal_lm`, a decoder-only LM prompted with
passage, question and answer. `loaded` is what advrace.models.runtime.loading.load_model returns:
(model, tokenizer, device, bf16)."""

from __future__ import annotations

import json
from pathlib import Path

from advrace.core.paths import looks_like_model_name
from advrace.models.decoders.distractor_inputs import end_id, prompt_ids
from advrace.models.decoders.tree_beam_decoder import CausalDecoder
from advrace.models.generators.seq2seq_encoding import encode_sources
from advrace.models.runtime.loading import SMOLLM2
from advrace.models.runtime.precision import cpu_threads


def decode_texts(tokenizer, token_lists) -> list[str]:
    # WordPiece decoding leaves "paul ' s" and "river ." without clean-up; BPE keeps its spaces.
    try:
        wordpiece = type(tokenizer.backend_tokenizer.model).__name__ == "WordPiece"
    except AttributeError:
        wordpiece = False
    texts = tokenizer.batch_decode([list(t) for t in token_lists], skip_special_tokens=True,
                                   clean_up_tokenization_spaces=wordpiece)
    return [" ".join(t.split()) for t in texts]


def unilm_candidates(loaded: tuple, examples: list, source_length: int, cfg, progress: bool,
                     desc: str) -> list[list[str]]:
    """Each question's beams from the seq2seq model, best first; sources of like length decoded together."""
    import torch
    from tqdm.auto import tqdm

    from advrace.models.decoders.beam_search import beam_search  # deferred: start-up time (torch)
    from advrace.models.generators.unilm import Seq2SeqDecoder  # deferred: start-up time (torch)

    model, tok, device, bf16 = loaded
    sources = encode_sources(tok, examples, source_length)
    order = sorted(range(len(sources)), key=lambda i: (-len(sources[i]), i))
    batches = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    banned = tuple(t for t in (tok.pad_token_id, tok.cls_token_id, tok.mask_token_id,
                               tok.unk_token_id) if t is not None)
    decoder = Seq2SeqDecoder(model)
    out: list[list[str]] = [[] for _ in examples]
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
            width = max(len(sources[i]) for i in idx)
            ids = torch.full((len(idx), width), tok.pad_token_id or 0, dtype=torch.long)
            for r, i in enumerate(idx):
                ids[r, :len(sources[i])] = torch.tensor(sources[i])
            lengths = torch.tensor([len(sources[i]) for i in idx])
            with cpu_threads(device):  # fitted to the load, batch by batch
                hyps = beam_search(decoder, ids.to(device), lengths.to(device),
                                   beam_size=cfg.beam_size, max_length=cfg.max_target_tokens,
                                   eos_id=tok.sep_token_id, length_penalty=cfg.length_penalty,
                                   banned=banned)
            for i, hs in zip(idx, hyps):
                out[i] = decode_texts(tok, [h.tokens for h in hs])
    return out


def causal_candidates(loaded: tuple, examples: list, cfg, progress: bool, desc: str) -> list[list[str]]:
    """Each question's beams from the causal LM after its prompt (`cfg.prompt`), best first, cut at
    a line break, repeats and empty ones dropped."""
    import torch
    from tqdm.auto import tqdm

    from advrace.models.decoders.beam_search import beam_search  # deferred: start-up time (torch)

    model, tok, device, bf16 = loaded
    eos = end_id(tok)
    banned = tuple(t for t in tok.all_special_ids if t != eos)
    prompts = prompt_ids(tok, examples, cfg.max_passage_tokens, cfg.prompt)
    decoder = CausalDecoder(model)
    # Questions decoded together share each step's pass over the weights and, on one passage,
    # their prompts' common beginning; a question's beams still see only its own prompt and
    # ancestors (CausalDecoder), so its candidates do not depend on the others. A model the
    # decoder cannot batch: one question at a time.
    size = cfg.batch_size if getattr(decoder, "batched", False) else 1
    groups = [prompts[i:i + size] for i in range(0, len(prompts), size)]
    out: list[list[str]] = []
    bar = tqdm(total=len(prompts), desc=desc, unit="question", disable=not progress, leave=False)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16), bar:
        for group in groups:
            source = torch.zeros((len(group), max(map(len, group))), dtype=torch.long)
            for r, ids in enumerate(group):
                source[r, :len(ids)] = torch.tensor(ids)
            lengths = torch.tensor([len(ids) for ids in group])
            # torch's threads fitted to the machine's load, batch by batch: on 2 cores beside
            # one busy process, 2 threads decoded 8-9x slower than 1 (docs/results.md)
            with cpu_threads(device):
                found = beam_search(decoder, source.to(device), lengths.to(device),
                                    beam_size=cfg.beam_size, max_length=cfg.max_target_tokens,
                                    eos_id=eos, length_penalty=cfg.length_penalty, banned=banned)
            for hyps in found:
                # a model not trained on the prompt may go on past a line break
                ranked = [t.split("\n")[0].strip() for t in decode_texts(tok, [h.tokens for h in hyps])]
                out.append([t for t in dict.fromkeys(ranked) if t])
            bar.update(len(group))
    return out


def backend_of(model: str) -> str:
    """The backend for a checkpoint with no recorded objective: a folder's by its architecture;
    `causal_lm` for `smollm2` or a Hub name (`owner/name`); `unilm` for a folder that does not
    exist yet, whose loading then says how to train one."""
    path = Path(model).expanduser()
    if path.is_dir():
        try:
            archs = json.loads((path / "config.json").read_text(encoding="utf-8")).get("architectures") or []
        except (OSError, json.JSONDecodeError):
            archs = []
        return "causal_lm" if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) else "unilm"
    return "causal_lm" if model == SMOLLM2 or looks_like_model_name(model) else "unilm"
