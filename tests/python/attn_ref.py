"""Float64 PyTorch reference of the attention the library computes (SPEC 1-5), for the tests.

Written from the formulas in shared/SPEC.md and the semantics stated in
tests/support/ref_attn.h (documents, patterns on in-document positions, ALiBi |t|, ...), with
no code shared with src/attn: every logit of every row is materialised in float64 and the
gradients come from torch.autograd over this graph, not from a hand-written backward.

entmax family: tau is found by bisection under no_grad (float64, 200 halvings), then one
Newton step on f(tau) = sum_i [(alpha-1) L_i - tau]_+^(1/(alpha-1)) - 1 is taken *with*
autograd from that detached tau. At the root f = 0, so the step leaves the value unchanged
and its derivative is the implicit-function gradient d tau/dL = -f_L / f_tau, the exact one.
"""
import math

import torch

NEG = float("-inf")


def alibi_slopes(n):
    """Press et al.'s get_slopes(n), in float64."""
    def pow2(m):
        start = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [start ** (i + 1) for i in range(m)]
    if n <= 0:
        return []
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** int(math.floor(math.log2(n)))
    return pow2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def rope_omega(f, D, ctx_len):
    """omega_k (D/2) of the position encoding in spec fields f; zeros where nothing rotates."""
    half = D // 2
    pos = f["pos"]
    theta = f["theta"]
    if pos not in ("rope", "prope", "ntk", "dynamic-ntk", "yarn"):
        return None
    if pos == "ntk":
        theta = theta * f["pos_scale"] ** (D / (D - 2))
    if pos == "dynamic-ntk" and ctx_len > f["train_len"]:
        s2 = f["pos_scale"] * ctx_len / f["train_len"] - (f["pos_scale"] - 1)
        theta = theta * s2 ** (D / (D - 2))
    om = [theta ** (-(2.0 * i) / D) for i in range(half)]
    if pos == "prope":
        m = int(math.floor(f["rope_p"] * D / 2))
        om = [o if i < m else 0.0 for i, o in enumerate(om)]
    if pos == "yarn":
        L, lt, s = f["train_len"], math.log(f["theta"]), f["pos_scale"]
        lo = max(math.floor(D * math.log(L / (f["beta_fast"] * 2 * math.pi)) / (2 * lt)), 0.0)
        hi = min(math.ceil(D * math.log(L / (f["beta_slow"] * 2 * math.pi)) / (2 * lt)), D - 1.0)
        if lo == hi:
            hi += 0.001
        out = []
        for i, o in enumerate(om):
            r = min(max((i - lo) / (hi - lo), 0.0), 1.0)
            out.append(o / s * r + o * (1 - r))
        om = out
    return torch.tensor(om, dtype=torch.float64)


def rotate(x, pos, omega):
    """Half-split rotation of x (..., N, D) by pos (N) * omega (D/2)."""
    half = x.shape[-1] // 2
    ang = pos.to(torch.float64)[:, None] * omega[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def doc_starts(ids):
    """Start index of the run holding each index (S,) of one batch row."""
    S = ids.shape[0]
    st = torch.zeros(S, dtype=torch.long)
    for j in range(1, S):
        st[j] = st[j - 1] if ids[j] == ids[j - 1] else j
    return st


def visible(f, p, kp):
    """Pattern rule on in-document positions p (T,1) and kp (1,S) -> bool (T,S)."""
    pat, w = f["pattern"], f["window"]
    if pat == "causal":
        return kp <= p
    if pat == "full":
        return torch.ones(torch.broadcast_shapes(p.shape, kp.shape), dtype=torch.bool)
    win = (kp <= p) & (kp >= p - w + 1)
    if pat == "window":
        return win
    if pat == "sinks":
        return (kp <= p) & ((kp < f["sinks"]) | (kp >= p - w + 1))
    if pat == "global":
        g = f["global"]
        return ((p >= 0) & (p < g)) | (kp < g) | win
    raise ValueError(pat)


def entmax_rows(L, vis, alpha):
    """alpha-entmax over the last axis of logits L where vis; returns (P, tau)."""
    am1 = alpha - 1.0
    z = torch.where(vis, am1 * L, torch.zeros((), dtype=L.dtype))
    anyv = vis.any(-1, keepdim=True)
    zmax = torch.where(vis, z, torch.full_like(z, NEG)).amax(-1, keepdim=True)
    zmax = torch.where(anyv, zmax, torch.zeros_like(zmax))
    n = vis.sum(-1, keepdim=True).clamp(min=1).to(z.dtype)
    e = 1.0 / am1

    def mass(tau):
        x = z - tau
        ok = vis & (x > 0)
        xs = torch.where(ok, x, torch.ones_like(x))
        return torch.where(ok, xs ** e, torch.zeros_like(x)), ok, xs

    with torch.no_grad():
        lo = (zmax - 1.0).detach()
        hi = (zmax - n ** (-am1)).detach()
        for _ in range(200):
            mid = (lo + hi) / 2
            s = mass(mid)[0].sum(-1, keepdim=True)
            big = s >= 1
            lo = torch.where(big, mid, lo)
            hi = torch.where(big, hi, mid)
        tau0 = (lo + hi) / 2
    pm, ok, xs = mass(tau0)
    fval = pm.sum(-1, keepdim=True) - 1.0
    fder = -(e * torch.where(ok, xs ** (e - 1.0), torch.zeros_like(xs))).sum(-1, keepdim=True)
    fder = torch.where(anyv, fder, -torch.ones_like(fder))
    tau = tau0 - fval / fder
    P = mass(tau)[0]
    P = torch.where(anyv, P, torch.zeros_like(P))
    tau = torch.where(anyv, tau, torch.full_like(tau, NEG))
    return P, tau.squeeze(-1)


def attention(q, k, v, spec_fields, *, pos0=None, doc_ids=None, logn_s=None, as_beta=None,
              as_gamma=None, sinks=None):
    """Reference forward. q (B,H,T,D), k, v (B,Hkv,S,D) float64 tensors (any may require
    grad, as may logn_s (H), as_beta/as_gamma (B,H,T)). Returns dict with out (B,H,T,D),
    row_stat (B,H,T) (lse for softmax, tau for the entmax family, -inf for empty rows),
    row_entropy (B,H,T), key_mass (B,H,S), row_support (B,H,T).
    Issue 31 (SPEC 10): softmax+sink appends one logit column per head (sinks (H), may require
    grad; a fixed sink takes spec sink_fixed) to the softmax and drops it before P V, as
    gpt-oss's reference does; the entropy counts the sink. sigmoid / sigmoid-logn: P =
    sigmoid(L + b) on visible keys, b = sig_b, -ln(train) or -ln(n_q); row_stat = sum P,
    entropy that of P / sum P."""
    f = spec_fields
    B, H, T, D = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    grp = H // Hkv
    p0 = S - T if pos0 is None else pos0
    qa = torch.arange(T) + p0                                   # (T) absolute query positions
    # in-document positions and run starts, per batch row
    if doc_ids is not None:
        kst = torch.stack([doc_starts(doc_ids[b]) for b in range(B)])   # (B,S)
        qst = kst[:, qa]                                                 # (B,T)
    else:
        kst = torch.zeros(B, S, dtype=torch.long)
        qst = torch.zeros(B, T, dtype=torch.long)
    kp = torch.arange(S)[None, :] - kst                         # (B,S)
    p = qa[None, :] - qst                                       # (B,T)
    vis = (qst[:, :, None] == kst[:, None, :]) & visible(f, p[:, :, None], kp[:, None, :])
    vis = vis[:, None, :, :].expand(B, H, T, S)                 # (B,H,T,S)
    nq = vis.sum(-1).to(torch.float64)                          # (B,H,T)

    kx = k.repeat_interleave(grp, dim=1)                        # (B,H,S,D)
    vx = v.repeat_interleave(grp, dim=1)
    qs = q
    if f["norm"] == "asentmax":
        ln = torch.log(torch.clamp(p + 2, min=2).to(torch.float64))[:, None, :]   # (B,1,T)
        scale = f["as_delta"] + as_beta * ln ** as_gamma                          # (B,H,T)
        if f["pos"] == "nape" and H >= 2:
            on = (torch.arange(H) >= H // 2).to(torch.float64)[None, :, None]
            scale = scale * on + (1 - on)
        qs = q * scale[..., None]
    om = rope_omega(f, D, S)
    if om is not None:
        qs = torch.stack([rotate(qs[b], p[b], om) for b in range(B)])
        kx = torch.stack([rotate(kx[b], kp[b], om) for b in range(B)])
    m_yarn = 1.0
    if f["pos"] == "yarn" and f["pos_scale"] > 1:
        m_yarn = (0.1 * math.log(f["pos_scale"]) + 1) ** 2
    Sc = qs @ kx.transpose(-1, -2) * (m_yarn / math.sqrt(D))    # (B,H,T,S)

    t = (p[:, :, None] - kp[:, None, :]).to(torch.float64)[:, None]   # (B,1,T,S)
    lognq = torch.log(nq.clamp(min=1))[..., None]               # (B,H,T,1)
    xf = f["xform"]
    if xf == "logn":
        s_h = logn_s if logn_s is not None else torch.full(
            (H,), f["logn_s"] if f["logn_s"] else 1 / math.log(f["train_len"]), dtype=torch.float64)
        L = s_h[None, :, None, None] * lognq * Sc
    elif xf == "qwen-logn":
        pp = (p + 1).to(torch.float64)
        fac = torch.where(pp > 1, torch.log(pp.clamp(min=1)) / math.log(f["train_len"]),
                          torch.ones_like(pp)).clamp(min=1)
        L = fac[:, None, :, None] * Sc
    elif xf == "sinv":
        tc = t.clamp(min=0)
        a2 = 2 * (torch.log(tc / f["tau"] + 1) - 0.5 + 1.0)  # log(e^.5) = .5, beta/alpha = 1
        L = torch.sqrt(a2) * Sc + (-a2 + 1.0)
    elif xf == "critical":
        L = f["gamma"] * lognq * Sc
    elif xf == "temp":
        L = f["temp"] * Sc
    else:
        L = Sc
    if f["pos"] in ("alibi", "nape"):
        nh = H if f["pos"] == "alibi" else H // 2
        m = torch.zeros(H, dtype=torch.float64)
        if nh > 0:
            m[:nh] = torch.tensor(alibi_slopes(nh), dtype=torch.float64)
        L = L - m[None, :, None, None] * t.abs()

    anyv = vis.any(-1, keepdim=True)
    psink = None
    if f["norm"] == "softmax":
        Lm = torch.where(vis, L, torch.where(anyv, torch.full_like(L, NEG), torch.zeros_like(L)))
        if f.get("sink", "none") != "none":
            sg = sinks if f["sink"] == "learned" and sinks is not None else torch.full(
                (H,), f["sink_fixed"] if f["sink"] == "fixed" else 0.0, dtype=torch.float64)
            col = sg.to(torch.float64)[None, :, None, None].expand(B, H, T, 1)
            lse = torch.logsumexp(torch.cat([Lm, col], -1), -1)
            psink = torch.exp(col.squeeze(-1) - lse)
        else:
            lse = torch.logsumexp(Lm, -1)
        P = torch.where(vis, torch.exp(Lm - lse[..., None]), torch.zeros_like(L))
        row_stat = torch.where(anyv.squeeze(-1), lse, torch.full_like(lse, NEG))
    elif f["norm"] in ("sigmoid", "sigmoid-logn"):
        if f["norm"] == "sigmoid-logn":
            b = -torch.log(nq.clamp(min=1))[..., None]
        else:
            b = f["sig_b"] if f["sig_b_set"] else -math.log(f["train_len"])
        P = torch.where(vis, torch.sigmoid(L + b), torch.zeros_like(L))
        M = P.sum(-1)
        row_stat = torch.where(anyv.squeeze(-1), M, torch.full_like(M, NEG))
    else:
        alpha = 2.0 if f["norm"] == "sparsemax" else f["alpha"]
        P, row_stat = entmax_rows(L, vis, alpha)
    out = P @ vx
    out = torch.where(anyv, out, torch.zeros_like(out))
    Pd = P.detach()
    ent = -(torch.where(Pd > 0, Pd * torch.log(Pd.clamp(min=1e-300)), torch.zeros_like(Pd))).sum(-1)
    if psink is not None:
        ps = psink.detach()
        ent = torch.where(anyv.squeeze(-1), ent - ps * torch.log(ps.clamp(min=1e-300)), ent)
    if f["norm"] in ("sigmoid", "sigmoid-logn"):
        M = Pd.sum(-1)
        ent = torch.where(M > 0, torch.log(M.clamp(min=1e-300)) - (-ent) / M.clamp(min=1e-300),
                          torch.zeros_like(M))
    return {"out": out, "row_stat": row_stat, "row_entropy": ent, "key_mass": Pd.sum(-2),
            "row_support": (Pd > 0).sum(-1).to(torch.float64)}
