"""The one packed-decoding core of the decoder LMs: continuation scoring, greedy generation and
DG's beam search all run a prompt once, keep its keys and values, and then feed several token
sequences over that cache in one row, each seeing only what it would see alone. That needs four
things done right for every model family, and they live here only:

- **The 4D mask in the form the attention takes.** Transformers hands a 4D mask to the attention
  as it is. SDPA reads a boolean mask as "may attend"; eager attention *adds* the mask to the
  scores, so a boolean mask there masks nothing (options would see each other). `mask` gives a
  boolean mask for SDPA and an additive one (0 or the dtype's minimum) for eager. Any other
  implementation (flash, flex, paged) takes no custom 4D mask: nothing is shared, every question
  runs unshared under the model's own 2D mask (exact, counted as a fallback).
- **A probe, not a list of families.** A mask in the right form is not enough: ALiBi models (MPT,
  BLOOM, Falcon with alibi) build positions from the mask, not from `position_ids`, and a remote
  model may do anything. So each core scores a small probe both ways when it is built (`probe`)
  and shares only if the two agree; otherwise everything runs unshared, counted with the reason.
  The probe and the packed scoring it checks live in packed_scoring (with `PROBE_TOLERANCE`).
- **A cache that holds the whole prompt.** A sliding-window layer keeps only its last
  `window - 1` keys, and a recurrent layer keeps a state, not keys. The core keeps every key in
  its own cache (`new_cache`), which is exact only while no sequence is longer than the smallest
  window: `limit` is that length (None: no limit; 0: nothing can be shared). Longer work falls
  back to running each sequence alone, as the model would run it (`UnsharedWork` counts it and its
  cost, the scorer says so once and writes it into results.json).
- **Position ids** that continue each sequence from its own prompt, whatever its place in the
  packed row.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from advrace.models.decoders.packed_scoring import probe_sharing
from advrace.models.runtime.loading import input_device
from advrace.models.runtime.kv_cache import forward_parameters, returned_cache, with_cache

# attention implementation -> the form of 4D mask it reads
MASK_FORMS = {"sdpa": "boolean", "eager": "additive"}



@dataclass
class UnsharedWork:
    """Work the core could not share (run alone instead), and what it cost: `tokens_run` were computed where sharing
    would have computed `tokens_shared`."""

    shared: int = 0
    alone: int = 0
    reasons: dict = field(default_factory=dict)  # reason -> how many items
    tokens_run: int = 0
    tokens_shared: int = 0

    def add(self, reason: str, run: int, shared: int) -> None:
        self.alone += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self.tokens_run += run
        self.tokens_shared += shared

    def record(self) -> dict:
        """The unshared work as results.json records it."""
        cost = round(self.tokens_run / self.tokens_shared, 3) if self.tokens_shared else None
        return {"shared": self.shared, "run_alone": self.alone, "reasons": dict(sorted(self.reasons.items())),
                "tokens_run_alone": self.tokens_run, "tokens_if_shared": self.tokens_shared,
                "cost_ratio": cost}


def cache_limit(config) -> tuple[int | None, str | None]:
    """(the longest sequence whose keys a full cache may share, why it is limited)."""
    try:
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer
    except ImportError:  # transformers 4.x before cache layers: only a sliding_window setting tells
        window = getattr(config, "sliding_window", None)
        return (int(window), f"sliding window of {window} tokens") if window else (None, None)
    try:
        layers = DynamicCache(config=config).layers
    except Exception as exc:  # noqa: BLE001 - a config the cache cannot read: share nothing
        return 0, f"cache of unknown layout ({type(exc).__name__})"
    windows = set()
    for layer in layers:
        if isinstance(layer, DynamicSlidingWindowLayer):
            windows.add(int(layer.sliding_window))
        elif type(layer) is not DynamicLayer:
            return 0, f"cache layer {type(layer).__name__} keeps no plain keys"
    if not windows:
        return None, None
    window = min(windows)
    return window, f"sliding window of {window} tokens"


def _takes(model, name: str) -> bool:
    """Whether the model's forward names the argument `name` (False where it cannot be read)."""
    return name in (forward_parameters(type(model)) or ())


def keeps_row_logits(model, device=None) -> bool:
    """Whether the model's forward gives back each row's logits at its own positions for a 2D
    `logits_to_keep` (transformers' `slice_logits_to_keep`: [rows, 1] positions, and a boolean
    mask of the positions scored, flattened), equal to its full logits there: a family that slices the old way (`hidden[:, keep]`: biogpt, csm, remote code)
    gives another shape, and one that ignores the argument gives every position. Two rows of
    three tokens, once per core."""
    import torch  # deferred for start-up time

    if not _takes(model, "logits_to_keep"):
        return False
    device = device or input_device(model)
    vocab = int(getattr(model.config, "vocab_size", 0) or 0) or 8
    ids = torch.tensor([[1, 2, 3], [3, 2, 1]], dtype=torch.long).clamp(max=vocab - 1).to(device)
    keep = torch.tensor([[1], [2]], dtype=torch.long, device=device)
    marked = torch.zeros((2, 3), dtype=torch.bool, device=device)
    marked[0, 1] = marked[1, 2] = True
    try:
        with torch.no_grad():
            full = model(input_ids=ids, use_cache=False).logits
            kept = model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits
            flat = model(input_ids=ids, use_cache=False, logits_to_keep=marked).logits
    except Exception:  # noqa: BLE001 - any failure means: do not ask for it
        return False
    if tuple(kept.shape) != (2, 1, full.shape[-1]) or tuple(flat.shape) != (2, full.shape[-1]):
        return False
    want = torch.stack([full[0, 1], full[1, 2]]).float()
    tolerance = 1e-3 if full.dtype in (torch.float32, torch.float64) else 5e-2
    return all(bool(torch.allclose(got.float(), want, atol=tolerance, rtol=tolerance)) for got in (kept[:, 0], flat))


def unmasked_reason(implementation: str) -> str | None:
    """Why an attention implementation cannot share a prompt's cache at all (None: it takes a 4D
    mask the core can build, so the probe decides)."""
    if implementation in MASK_FORMS:
        return None
    return f"attention {implementation!r} takes no custom 4D mask"


class PackedCore:
    """A model's packed decoding: its mask form, the cache it may share (checked by a probe when
    the core is built), and the count of the work it could not share. `device`: where the probe's inputs go (default:
    the model's input device)."""

    def __init__(self, model, device=None):
        self.model = model
        config = model.config
        self.implementation = getattr(config, "_attn_implementation", None) or "eager"
        self.additive = MASK_FORMS.get(self.implementation) == "additive"
        self.limit, self.why_limited = cache_limit(config)
        self.unshared = UnsharedWork()
        self.probe: dict | None = None  # what the probe found; None: not run
        # a prefill only fills the cache: its logits are computed for the last position only
        # where the forward takes `logits_to_keep`; `full_logit_prefills` counts those that could not
        self.keeps_logits = keeps_row_logits(model, device)
        self.full_logit_prefills = 0
        self.rows_kept = 0  # finished rows decoded on because their cache could not drop them
        unmasked = unmasked_reason(self.implementation)
        if unmasked is not None:
            self.limit, self.why_limited = 0, unmasked
        elif self.limit != 0:
            self._check(device)

    def _check(self, device) -> None:
        """Score the probe shared and unshared; share nothing if they part (`probe_sharing`)."""
        found = probe_sharing(self, device)
        if found is None:  # a window too small to hold a probe: nothing real fits in it either
            self.limit = 0
            return
        # the tolerance as text: results.json rounds its floats to fewer places than 1e-4 has
        self.probe = {"dtype": found["dtype"], "tolerance": f"{found['tolerance']:g}", "passed": found["passed"]}
        if not found["passed"]:
            self.limit, self.why_limited = 0, found["reason"]

    def describe(self) -> dict:
        """What the core does for this model, for the report."""
        return {"attention": self.implementation, "mask": MASK_FORMS.get(self.implementation, "none"),
                "shared_cache_limit": self.limit, "limited_by": self.why_limited, "probe": self.probe}

    def fits(self, length: int) -> bool:
        """Whether a sequence of `length` tokens (prompt and what follows it) can share the cache."""
        return self.limit is None or length <= self.limit

    def new_cache(self):
        """An empty cache that keeps every key and value of every layer (even a sliding one: the
        mask, not the cache, then keeps the window; see `fits`)."""
        from transformers import DynamicCache

        return DynamicCache()

    def mask(self, visible):
        """[rows, queries, keys] booleans ("may attend") as the model's 4D attention mask."""
        import torch  # deferred for start-up time

        mask = visible.unsqueeze(1)
        if not self.additive:
            return mask
        dtype = self.model.dtype if self.model.dtype.is_floating_point else torch.float32
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)

    def prefill(self, prefixes: list[tuple[int, ...]], pad_id: int, device, *, cache=None, past: int = 0):
        """Run the prefixes, right-padded, into a new full cache, or after the `past` tokens that
        `cache` holds for every row (a shared prompt's): (cache, width). A row's pad slots are
        masked out later; right padding keeps every real token's attention free of them."""
        out, width = self._prefilled(prefixes, pad_id, device, cache, past, 1)
        return (cache if out is None else returned_cache(out)), width

    def prefill_last(self, rows: list[tuple[int, ...]], pad_id: int, device, *, cache=None, past: int = 0):
        """`prefill` of rows of one token or more, with each row's next-token logits, from its own
        last token: (cache, width, logits [rows, vocab]). Greedy decoding so takes its first token
        from the prefill, where a step would otherwise feed every row's last token again. The
        logits are asked for at each row's last position (a 2D `logits_to_keep`); a forward
        that gives back every position's (no `logits_to_keep`) is read at those positions, and
        one that gives back any other shape is an error, not a guess."""
        import torch  # deferred for start-up time

        last = torch.tensor([len(r) - 1 for r in rows], dtype=torch.long).view(-1, 1).to(device)
        out, width = self._prefilled(rows, pad_id, device, cache, past, last)
        logits = out.logits
        if logits.dim() == 3 and logits.shape[:2] == (len(rows), width) and width > 1 and not self.keeps_logits:
            logits = torch.take_along_dim(logits, last[..., None], dim=1)
        if logits.dim() != 3 or logits.shape[:2] != (len(rows), 1):
            raise RuntimeError(f"{type(self.model).__name__} gave logits of shape {tuple(logits.shape)} for "
                               f"logits_to_keep of shape {tuple(last.shape)} (one position a row)")
        return returned_cache(out), width, logits[:, 0]

    def _prefilled(self, prefixes, pad_id: int, device, cache, past: int, keep):
        """(the forward's output, width) of `prefill`, its logits kept at `keep` (None: no rows)."""
        import torch  # deferred for start-up time

        width = max((len(p) for p in prefixes), default=0)
        if width == 0:
            return None, 0
        ids = torch.full((len(prefixes), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(prefixes), width), dtype=torch.long)
        for r, p in enumerate(prefixes):
            ids[r, :len(p)] = torch.tensor(p, dtype=torch.long)
            mask[r, :len(p)] = 1
        positions = past + (mask.cumsum(-1) - 1).clamp(min=0)
        if past:
            mask = torch.cat([torch.ones((len(prefixes), past), dtype=torch.long), mask], dim=-1)
        if self.keeps_logits:
            kept = {"logits_to_keep": keep}
        else:
            kept = {}
            self.full_logit_prefills += 1
        out = self.model(input_ids=ids.to(device), attention_mask=mask.to(device),
                         position_ids=positions.to(device),
                         **self.cache_kwargs(self.new_cache() if cache is None else cache), use_cache=True, **kept)
        return out, width

    @staticmethod
    def _plain(cache) -> bool:
        """Whether `cache` is the core's own kind (`new_cache`: full keys and values, batch first),
        whose rows may be viewed, repeated and dropped without asking the cache."""
        from transformers import DynamicCache  # deferred for start-up time
        from transformers.cache_utils import DynamicLayer

        return type(cache) is DynamicCache and all(type(layer) is DynamicLayer for layer in cache.layers)

    def repeated(self, cache, rows: int):
        """A new cache holding the one row of `cache` (a shared prompt's) for each of `rows` rows:
        views of its keys and values where it is the core's own kind (the next forward's update
        copies them once, into the rows' own), else a deep copy repeated. `cache` is not changed."""
        if not self._plain(cache):
            out = copy.deepcopy(cache)
            out.batch_repeat_interleave(rows)
            return out
        from transformers.cache_utils import DynamicLayer  # deferred for start-up time

        out = self.new_cache()
        for layer in cache.layers:
            view = DynamicLayer()
            if layer.is_initialized:
                view.lazy_initialization(layer.keys, layer.values)
                view.keys = layer.keys.expand(rows, *layer.keys.shape[1:])
                view.values = layer.values.expand(rows, *layer.values.shape[1:])
            out.layers.append(view)
        return out

    def select_rows(self, cache, rows: list[int]) -> bool:
        """Keep only `rows` (batch indices) of `cache`, in place, where it is the core's own kind;
        False (nothing changed) for any other cache."""
        if not self._plain(cache):
            return False
        import torch  # deferred for start-up time

        index = torch.tensor(rows, dtype=torch.long)
        for layer in cache.layers:
            if layer.is_initialized and layer.keys.numel():
                layer.keys = layer.keys.index_select(0, index.to(layer.keys.device))
                layer.values = layer.values.index_select(0, index.to(layer.values.device))
        return True

    def cache_kwargs(self, cache) -> dict:
        return with_cache(self.model, cache)

