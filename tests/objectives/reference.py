"""An independent reference for every objective, written from ``ALGORITHMS.md`` alone.

Plain Python floats (float64) and per-token loops, with each gradient derived by hand
(no autograd), so a test compares two derivations, not one code path with itself. Used
by ``test_reference.py``; nothing here imports rlvr.

Conventions read from ``ALGORITHMS.md`` (and ``docs/objectives.md`` where it is silent):

- at a ratio exactly on a clip bound the token is inside the band (unclipped gradient);
- a row with no response token is no sequence (it is not counted in ``num_seqs``);
- per-token advantages in a sequence-level objective enter each token's
  ``|min(r*A_t, clip(r)*A_t)|`` (for ``gmpo``: the geometric mean of ``|A_t|``);
- the metrics are over the call's response tokens; ``clip/*`` counts tokens with
  ``A != 0`` only; ``apmpo/*`` and ``pmpo/p`` are means over the call's sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

INF = math.inf

DEFAULTS = {
    "grpo": dict(eps_low=0.2, eps_high=0.2, clip_c=None),
    "dapo": dict(eps_low=0.2, eps_high=0.28, clip_c=None),
    "dr_grpo": dict(eps_low=0.2, eps_high=0.2, clip_c=None),
    "abc_grpo": dict(eps1=0.2, eps2=0.2, eps3=0.2, eps4=0.2),
    "etr": dict(
        eps_base=0.2, lam1=0.1, lam2=0.1, pass_threshold=0.0, eps_floor=0.01, eps_ceil=0.95
    ),
    "gppo": dict(eps_low=0.2, eps_high=0.28, b1=1.0, b2=1.0, clip_c=None),
    "cispo": dict(eps_low=0.2, eps_high=0.28),
    "gspo": dict(eps_low=3e-4, eps_high=4e-4),
    "gmpo": dict(eps_low=0.4, eps_high=0.4),
    "pmpo": dict(
        gamma=0.8,
        eps_low=0.2,
        eps_high=0.2,
        p_schedule="exp",
        p_min=0.05,
        reward_range=(0.0, 1.0),
        stats_scope="batch",
    ),
}
DEFAULTS["apmpo"] = dict(
    DEFAULTS["pmpo"], eps_min=0.2, eps_max=0.4, delta=1e-6, fss_form="ratio", adaptive_lower=False
)
LOSS_AGG = {
    "grpo": "seq-mean-token-mean",
    "dapo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "abc_grpo": "seq-mean-token-mean",
    "etr": "seq-mean-token-mean",
    "gppo": "token-mean",
    "cispo": "token-mean",
    "gspo": "seq-mean-token-mean",
    "gmpo": "seq-mean-token-mean",
    "pmpo": "seq-mean-token-mean",
    "apmpo": "seq-mean-token-mean",
}
SEQUENCE_LEVEL = {"gmpo", "pmpo", "apmpo"}


def sign(x: float) -> float:
    """-1, 0 or 1."""
    return (x > 0) - (x < 0)


# ---------------------------------------------------------------- advantages / statistics


def _mean_std(xs: list[float]) -> tuple[float, float]:
    """Mean and population std."""
    mu = sum(xs) / len(xs)
    return mu, math.sqrt(sum((x - mu) ** 2 for x in xs) / len(xs))


def advantages(rewards: list[float], g: int, mode: str, eps: float = 1e-6) -> list[float]:
    """ALGORITHMS.md's advantage table; an all-equal group gets exactly 0."""
    _, std_batch = _mean_std(rewards)
    out = []
    for k in range(0, len(rewards), g):
        grp = rewards[k : k + g]
        mu, std = _mean_std(grp)
        for x in grp:
            if all(y == grp[0] for y in grp):
                out.append(0.0)
            elif mode == "group_mean":
                out.append(x - mu)
            elif mode == "group_std":
                out.append((x - mu) / (std + eps))
            else:
                out.append((x - mu) / (std_batch + eps))
    return out


def pass_rates(rewards: list[float], g: int, threshold: float) -> list[float]:
    """Per sample, the share of its group's rewards above ``threshold`` (ETR's p_g)."""
    out = []
    for k in range(0, len(rewards), g):
        grp = rewards[k : k + g]
        p = sum(x > threshold for x in grp) / g
        out += [p] * g
    return out


def reward_stats(
    rewards: list[float], g: int, reward_range, scope: str
) -> list[tuple[float, float]]:
    """Per sample ``(mu, sigma)`` of the rewards mapped to [0, 1], over ``scope``."""
    lo, hi = reward_range
    mapped = [(x - lo) / (hi - lo) for x in rewards]
    if scope == "batch":
        return [_mean_std(mapped)] * len(rewards)
    out = []
    for k in range(0, len(rewards), g):
        out += [_mean_std(mapped[k : k + g])] * g
    return out


# ---------------------------------------------------------------- per-token objectives


@dataclass
class Token:
    """One response token: log-ratio ``lr``, ratio ``r``, advantage ``a``, ``logp``."""

    lr: float
    a: float
    logp: float

    @property
    def r(self) -> float:
        return math.exp(self.lr)


@dataclass
class TokenOut:
    """Per-token loss, its derivative wrt logp, clip flags and the nominal band."""

    loss: float
    grad: float
    low: bool = False
    high: bool = False
    band: tuple[float, float] = (-INF, INF)
    dual: bool = False
    extra: dict = field(default_factory=dict)


def ppo_clip(tok: Token, lo: float, hi: float, clip_c=None) -> TokenOut:
    """``-min(r*A, clip(r, lo, hi)*A)`` with the optional dual clip, and its derivative."""
    r, a = tok.r, tok.a
    clipped = min(max(r, lo), hi)
    loss = -min(r * a, clipped * a)
    high, low = a > 0 and r > hi, a < 0 and r < lo
    grad = 0.0 if (high or low or a == 0) else -a * r
    dual = False
    if clip_c is not None and a < 0 and -clip_c * a < loss:
        loss, grad, dual = -clip_c * a, 0.0, True
    return TokenOut(loss, grad, low, high or dual, (lo, hi), dual)


def grpo_tok(tok: Token, c: dict) -> TokenOut:
    """``grpo`` / ``dapo`` / ``dr_grpo``."""
    return ppo_clip(tok, 1 - c["eps_low"], 1 + c["eps_high"], c["clip_c"])


def abc_tok(tok: Token, c: dict) -> TokenOut:
    """ABC-GRPO: unconditional clip into the band of A's sign (A <= 0: eps3/eps4)."""
    r, a = tok.r, tok.a
    lo, hi = (1 - c["eps2"], 1 + c["eps1"]) if a > 0 else (1 - c["eps4"], 1 + c["eps3"])
    inside = lo <= r <= hi
    rt = min(max(r, lo), hi)
    return TokenOut(-rt * a, -a * r if inside else 0.0, r < lo, r > hi, (lo, hi))


def etr_eps(a: float, p: float, c: dict) -> tuple[float, bool]:
    """ETR's width ``eps_base + lam1*tanh(A) + lam2*4p(1-p)`` clamped; and whether clamped."""
    raw = c["eps_base"] + c["lam1"] * math.tanh(a) + c["lam2"] * 4 * p * (1 - p)
    eps = min(max(raw, c["eps_floor"]), c["eps_ceil"])
    return eps, eps != raw


def gppo_tok(tok: Token, c: dict) -> TokenOut:
    """GPPO eq. 17: branch-wise gradient-preserving clip."""
    r, a = tok.r, tok.a
    lo, hi = 1 - c["eps_low"], 1 + c["eps_high"]
    if a < 0 and r < lo:
        out = TokenOut(-c["b1"] * lo * a, -c["b1"] * lo * a, low=True)
    elif a > 0 and r > hi:
        out = TokenOut(-c["b2"] * hi * a, -c["b2"] * hi * a, high=True)
    else:
        out = TokenOut(-r * a, -r * a)
    out.band = (lo, hi)
    if c["clip_c"] is not None and a < 0 and -c["clip_c"] * a < out.loss:
        out.loss, out.grad, out.dual, out.high = -c["clip_c"] * a, 0.0, True, True
    out.extra["preserved"] = (out.low or out.high) and not out.dual
    return out


def cispo_tok(tok: Token, c: dict) -> TokenOut:
    """CISPO: ``-sg(clip(r))*A*logp``; gradient ``-clip(r)*A`` in all four quadrants."""
    lo, hi = 1 - c["eps_low"], 1 + c["eps_high"]
    w = min(max(tok.r, lo), hi)
    return TokenOut(-w * tok.a * tok.logp, -w * tok.a, tok.r < lo, tok.r > hi, (lo, hi))


# ---------------------------------------------------------------- rows


def token_row(name: str, row: list[Token], c: dict, extra: dict) -> list[TokenOut]:
    """Per-token outputs of a token-level objective on one row's response tokens."""
    if name in ("grpo", "dapo", "dr_grpo"):
        return [grpo_tok(t, c) for t in row]
    if name == "abc_grpo":
        return [abc_tok(t, c) for t in row]
    if name == "gppo":
        return [gppo_tok(t, c) for t in row]
    if name == "cispo":
        return [cispo_tok(t, c) for t in row]
    if name == "etr":
        outs = []
        for t in row:
            eps, clamped = etr_eps(t.a, extra["pass_rate"], c)
            o = ppo_clip(t, 1 - eps, 1 + eps)
            o.extra.update(eps=eps, clamped=clamped)
            outs.append(o)
        return outs
    if name == "gspo":
        return gspo_row(row, c)
    raise KeyError(name)


def gspo_row(row: list[Token], c: dict) -> list[TokenOut]:
    """GSPO-token: value uses the sequence ratio, gradient ``s_i`` on each token."""
    s = math.exp(sum(t.lr for t in row) / len(row))
    lo, hi = 1 - c["eps_low"], 1 + c["eps_high"]
    outs = []
    for t in row:
        o = ppo_clip(Token(math.log(s), t.a, t.logp), lo, hi)
        o.extra["seq_ratio"] = s
        outs.append(o)
    return outs


def gmpo_row(row: list[Token], c: dict) -> tuple[float, list[float], list[TokenOut]]:
    """GMPO: ``-A*exp(mean_t x)``; returns the row loss, d loss/d logp_t, token flags."""
    a = row[0].a
    s = sign(a)
    xs, dxs, outs = [], [], []
    for t in row:
        y = min(max(t.lr, -c["eps_low"]), c["eps_high"])
        x = s * min(s * t.lr, s * y)
        if s > 0:
            dx = 1.0 if t.lr <= c["eps_high"] else 0.0
        else:
            dx = 1.0 if (s < 0 and t.lr >= -c["eps_low"]) else 0.0
        xs.append(x)
        dxs.append(dx)
        high = s > 0 and t.lr > c["eps_high"]
        low = s < 0 and t.lr < -c["eps_low"]
        outs.append(
            TokenOut(0.0, 0.0, low, high, (math.exp(-c["eps_low"]), math.exp(c["eps_high"])))
        )
    # |A| enters as a factor of each token's |min(r*A, clip(r)*A)|: per-token advantages
    # give the geometric mean of |A_t| (== |A_i| for a sequence advantage)
    u = sum(xs) / len(xs)
    scale = s * math.exp(sum(math.log(abs(t.a)) for t in row) / len(row)) if s else 0.0
    loss = -scale * math.exp(u)
    grads = [-scale * math.exp(u) * dx / len(row) for dx in dxs]
    return loss, grads, outs


def pmpo_row(name: str, row: list[Token], c: dict, mu: float, sigma: float):
    """PMPO/APMPO: ``-sign(A)*(mean phi^p)^(1/p)``; row loss, gradients, flags, metrics."""
    if c["p_schedule"] == "exp":
        p = math.exp(-c["gamma"] * mu)
    else:
        p = min(max(1 - c["gamma"] * mu, c["p_min"]), 1.0)
    lo, hi = 1 - c["eps_low"], 1 + c["eps_high"]
    met = {"p": p}
    if name == "apmpo":
        fss = {"ratio": mu / (sigma + c["delta"]), "mean": mu, "inv_std": 1 / (sigma + c["delta"])}[
            c["fss_form"]
        ]
        eps_ada = c["eps_min"] + (c["eps_max"] - c["eps_min"]) * math.tanh(fss)
        hi = 1 + eps_ada
        if c["adaptive_lower"]:
            lo = 1 - eps_ada
        met.update(fss=fss, eps_ada=eps_ada)
    outs = [ppo_clip(t, lo, hi) for t in row]
    a = row[0].a
    n = len(row)
    if a == 0:
        return 0.0, [0.0] * n, outs, met
    # phi = |loss of the clipped surrogate|; d phi/d logp = |A| r where unclipped
    phis = [abs(o.loss) for o in outs]
    dphis = [0.0 if (o.low or o.high) else abs(t.a) * t.r for t, o in zip(row, outs, strict=True)]
    s = sign(a)
    if p < 1e-4:
        j = s * math.exp(sum(math.log(f) for f in phis) / n)
        dj = [j / (n * f) * d for f, d in zip(phis, dphis, strict=True)]
    else:
        m = sum(f**p for f in phis) / n
        j = s * m ** (1 / p)
        dj = [s * m ** (1 / p - 1) * f ** (p - 1) / n * d for f, d in zip(phis, dphis, strict=True)]
    return -j, [-x for x in dj], outs, met


# ---------------------------------------------------------------- aggregation and the loss


def agg_coefs(mask: list[list[float]], mode: str, num_tokens=None, num_seqs=None, max_len=None):
    """``c[i][t]`` with ``aggregate(l) = sum c*l`` for ``mode`` (ALGORITHMS.md's table)."""
    lens = [sum(1 for m in row if m) for row in mask]
    n_tok = num_tokens if num_tokens is not None else sum(lens)
    n_seq = num_seqs if num_seqs is not None else sum(1 for n in lens if n)
    width = max_len if max_len is not None else len(mask[0])
    coefs = []
    for row, n in zip(mask, lens, strict=True):
        per = {
            "token-mean": 1 / n_tok if n_tok else 0.0,
            "seq-mean-token-mean": 1 / (n * n_seq) if n else 0.0,
            "seq-mean-token-sum": 1 / n_seq if n_seq else 0.0,
            "seq-mean-token-sum-norm": 1 / (n_seq * width) if n_seq else 0.0,
            "token-sum": 1.0,
        }[mode]
        coefs.append([per if m else 0.0 for m in row])
    return coefs


def kl_term(logp: float, ref: float, est: str) -> tuple[float, float]:
    """KL estimator value and its derivative wrt logp."""
    d = logp - ref
    if est == "k1":
        return d, 1.0
    if est == "k2":
        return 0.5 * d * d, d
    return math.exp(-d) + d - 1, 1 - math.exp(-d)


@dataclass
class RefOut:
    """Reference loss, d loss/d logp, d loss/d entropy and metrics (plain floats)."""

    loss: float
    grad: list[list[float]]
    grad_entropy: list[list[float]]
    metrics: dict


def _rows(logp, old, adv, mask):
    """Response tokens per row as :class:`Token` lists, with their column indices."""
    rows = []
    for i, mrow in enumerate(mask):
        cols = [t for t, m in enumerate(mrow) if m]
        a_of = (lambda t, i=i: adv[i][t]) if isinstance(adv[i], list) else (lambda t, i=i: adv[i])
        rows.append((cols, [Token(logp[i][t] - old[i][t], a_of(t), logp[i][t]) for t in cols]))
    return rows


def objective_rows(name, c, rows, rewards, group_size):
    """Per row: (row loss or None, per-token grads, per-token outs, row metrics)."""
    out = []
    for i, (cols, row) in enumerate(rows):
        if not cols:
            out.append((None, [], [], {}))
            continue
        if name == "gmpo":
            loss, grads, outs = gmpo_row(row, c)
            out.append((loss, grads, outs, {}))
        elif name in ("pmpo", "apmpo"):
            mu, sigma = reward_stats(rewards, group_size, c["reward_range"], c["stats_scope"])[i]
            out.append(pmpo_row(name, row, c, mu, sigma))
        else:
            extra = {}
            if name == "etr":
                extra["pass_rate"] = pass_rates(rewards, group_size, c["pass_threshold"])[i]
            outs = token_row(name, row, c, extra)
            out.append((None, [o.grad for o in outs], outs, {}))
    return out


@dataclass
class Options:
    """``policy_loss``'s optional arguments, with its defaults (nested lists for tensors)."""

    rewards: list | None = None
    group_size: int | None = None
    ref_logp: list | None = None
    entropy: list | None = None
    token_weights: list | None = None
    loss_agg: str | None = None
    num_tokens: int | None = None
    num_seqs: int | None = None
    max_len: int | None = None
    num_sft_tokens: int | None = None
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    sft_coef: float = 0.0
    sft_threshold: float = 1.0
    entropy_coef: float = 0.0


def reference_loss(name: str, hp: dict, logp, old, adv, mask, **kwargs) -> RefOut:
    """The whole loss of ``ALGORITHMS.md`` for nested lists (``kwargs``: :class:`Options`)."""
    o = Options(**kwargs)
    c = dict(DEFAULTS[name], **hp)
    coefs = agg_coefs(mask, o.loss_agg or LOSS_AGG[name], o.num_tokens, o.num_seqs, o.max_len)
    rows = _rows(logp, old, adv, mask)
    per_row = objective_rows(name, c, rows, o.rewards, o.group_size)
    B, T = len(mask), len(mask[0])
    w = o.token_weights or [[1.0] * T for _ in range(B)]
    out = RefOut(0.0, [[0.0] * T for _ in range(B)], [[0.0] * T for _ in range(B)], {})
    for i, ((cols, _row), (row_loss, grads, outs, _)) in enumerate(zip(rows, per_row, strict=True)):
        if row_loss is not None:  # sequence level: the row loss repeated on each token
            weight = sum(coefs[i][t] * w[i][t] for t in cols)
            out.loss += weight * row_loss
            for t, g in zip(cols, grads, strict=True):
                out.grad[i][t] += weight * g
        else:
            for t, tok in zip(cols, outs, strict=True):
                out.loss += coefs[i][t] * w[i][t] * tok.loss
                out.grad[i][t] += coefs[i][t] * w[i][t] * tok.grad
    add_regularisers(out, rows, coefs, logp, o)
    out.metrics = reference_metrics(name, c, rows, per_row)
    out.metrics.update(regulariser_metrics(rows, logp, o))
    return out


def add_regularisers(out: RefOut, rows, coefs, logp, o: Options) -> None:
    """KL (aggregated with ``coefs``), entropy bonus and SFT token-mean NLL, in place."""
    cells = [(i, t) for i, (cols, _) in enumerate(rows) for t in cols]
    for i, t in cells:
        if o.kl_coef:
            v, d = kl_term(logp[i][t], o.ref_logp[i][t], o.kl_estimator)
            out.loss += o.kl_coef * coefs[i][t] * v
            out.grad[i][t] += o.kl_coef * coefs[i][t] * d
        if o.entropy_coef:
            out.loss -= o.entropy_coef * coefs[i][t] * o.entropy[i][t]
            out.grad_entropy[i][t] -= o.entropy_coef * coefs[i][t]
    if o.sft_coef:
        pos = [(i, t) for i, t in cells if o.rewards[i] >= o.sft_threshold]
        n_sft = o.num_sft_tokens if o.num_sft_tokens is not None else len(pos)
        for i, t in pos:
            out.loss += o.sft_coef * -logp[i][t] / n_sft
            out.grad[i][t] -= o.sft_coef / n_sft


def regulariser_metrics(rows, logp, o: Options) -> dict:
    """``kl/ref_<estimator>``, ``policy/entropy``, ``sft/loss`` over the call's tokens."""
    cells = [(i, t) for i, (cols, _) in enumerate(rows) for t in cols]
    n, m = len(cells), {}
    if o.ref_logp is not None:
        kl = sum(kl_term(logp[i][t], o.ref_logp[i][t], o.kl_estimator)[0] for i, t in cells)
        m[f"kl/ref_{o.kl_estimator}"] = kl / n
    if o.entropy is not None:
        m["policy/entropy"] = sum(o.entropy[i][t] for i, t in cells) / n
    if o.sft_coef:
        pos = [-logp[i][t] for i, t in cells if o.rewards[i] >= o.sft_threshold]
        m["sft/loss"] = sum(pos) / len(pos) if pos else 0.0
    return m


def clip_metrics(tokens: list[tuple[Token, TokenOut]], c: dict) -> dict:
    """``clip/*``: clipped shares (``A != 0``) and out-of-band events by quadrant."""
    n = len(tokens)
    live = [(t, o) for t, o in tokens if t.a != 0]
    m = {
        "clip/low_frac": sum(o.low for _, o in live) / n,
        "clip/high_frac": sum(o.high for _, o in live) / n,
        "clip/frac": sum(o.low or o.high for _, o in live) / n,
    }
    if c.get("clip_c") is not None:
        m["clip/dual_frac"] = sum(o.dual for _, o in live) / n
    q = [0, 0, 0, 0]
    for t, o in live:
        r = o.extra.get("seq_ratio", t.r)
        if not o.band[0] <= r <= o.band[1]:
            q[(0 if r > 1 else 1) if t.a > 0 else (2 if r < 1 else 3)] += 1
    for k in range(4):
        m[f"clip/q{k + 1}_frac"] = q[k] / n
        m[f"clip/q{k + 1}_share"] = q[k] / sum(q) if sum(q) else 0.0
    return m


def reference_metrics(name, c, rows, per_row) -> dict:
    """ALGORITHMS.md's metric list over the call's response tokens (no regulariser's)."""
    pairs = zip(rows, per_row, strict=True)
    toks = [(t, o) for (_, row), (_, _, outs, _) in pairs for t, o in zip(row, outs, strict=True)]
    n = len(toks)
    m = clip_metrics(toks, c)
    ratios = [t.r for t, _ in toks]
    m.update({"ratio/mean": sum(ratios) / n, "ratio/max": max(ratios), "ratio/min": min(ratios)})
    m["kl/old_approx"] = sum(-t.lr for t, _ in toks) / n
    if name == "etr":
        eps = [o.extra["eps"] for _, o in toks]
        m.update({"etr/eps_mean": sum(eps) / n, "etr/eps_min": min(eps), "etr/eps_max": max(eps)})
        m["etr/clamped_frac"] = sum(o.extra["clamped"] for _, o in toks) / n
    if name == "gppo":
        m["gppo/preserved_frac"] = sum(o.extra["preserved"] for t, o in toks if t.a != 0) / n
    if name in ("pmpo", "apmpo"):
        seqs = [rm for (cols, _), (_, _, _, rm) in zip(rows, per_row, strict=True) if cols]
        for key in ("p", "eps_ada", "fss") if name == "apmpo" else ("p",):
            m[f"{name}/{key}"] = sum(s[key] for s in seqs) / len(seqs)
    return m
