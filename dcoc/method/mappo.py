"""Multi-agent PPO with centralized training and decentralized execution (MAPPO-style).

This is DCOC's exploration engine, written to be read top to bottom (CleanRL style):
every hyperparameter lives in :class:`MAPPOConfig`, one seed drives everything.

The environment
---------------
A *walk* over a discrete :class:`~dcoc.search.space.Space`.  The state is the vector of
choice positions of every knob.  Each agent owns a disjoint group of knobs and, at every
step, picks one move per owned knob from ``moves`` (default ``{-1, 0, +1}``: previous
choice, keep, next choice; moves off the ends are masked).  The joint move is applied at
once.  A move into a config that breaks a space constraint (resource budget, buffer
fit) is undone and penalised; such configs are never measured.

Reward: the *normalized throughput* of the new state, i.e. predicted throughput from the
surrogate (cost model) divided by the best measured throughput so far; when the state
has been measured, the measured value is used instead.  All agents share the team
reward (cooperative game).

Observations
------------
* agent ``i`` (decentralized actor): positions of its own knobs normalized to [0, 1], a
  context vector (workload / hardware descriptor), the walk progress ``t/T`` and the
  current state's normalized throughput (the "recent reward").
* the centralized critic: positions of *all* knobs, the context, ``t/T``, the current
  normalized throughput and the best one seen in this walk.

Training
--------
PPO with a clipped surrogate objective per agent, advantages from the centralized
critic's value estimates via GAE, an entropy bonus, one Adam optimizer over all networks
and gradient clipping.  This is the MAPPO recipe (Yu et al., 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games") applied to the DCOC setting
(Fayyazi et al., arXiv 2407.08192: three actor-critic agents under CTDE).

The ``rl`` and ``chameleon`` baselines keep their own single-agent PPO
(:mod:`dcoc.tuners.rl_tuner`: CHAMELEON's network, walks and rewards); its docstring says
why it is not this class.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from dcoc.method.config import MAPPOConfig
from dcoc.seeding import child_seed

#: agent names of the paper's split, by knob group (everything else: scheduling)
_AGENT_OF_GROUP = {"hw": "hardware", "tile": "mapping"}


def agent_groups(space) -> tuple[list[list[int]], list[str]]:
    """The paper's split of ``space``'s knobs: (knob index groups, agent names) of the
    hardware agent (knob group ``hw``), the mapping agent (``tile``: tiling) and the
    scheduling agent (the rest: virtual threads, unrolling, compute locations); empty
    agents are dropped (a software-only task has no hardware agent)."""
    order = ["hardware", "mapping", "scheduling"]
    buckets: dict = {n: [] for n in order}
    for i, k in enumerate(space.knobs):
        buckets[_AGENT_OF_GROUP.get(k.group, "scheduling")].append(i)
    names = [n for n in order if buckets[n]]
    return [buckets[n] for n in names], names


def _mlp(inp: int, out: int, hidden: int, out_gain: float = 1.0) -> nn.Sequential:
    def layer(i, o, gain):
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, gain)
        nn.init.zeros_(lin.bias)
        return lin

    return nn.Sequential(
        layer(inp, hidden, np.sqrt(2)), nn.Tanh(),
        layer(hidden, hidden, np.sqrt(2)), nn.Tanh(),
        layer(hidden, out, out_gain),
    )


class Actor(nn.Module):
    """Decentralized actor: own observation -> one categorical over ``moves`` per owned knob."""

    def __init__(self, obs_dim: int, n_knobs: int, n_moves: int, hidden: int):
        super().__init__()
        self.n_knobs, self.n_moves = n_knobs, n_moves
        self.net = _mlp(obs_dim, n_knobs * n_moves, hidden, out_gain=0.01)

    def logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lg = self.net(obs).view(-1, self.n_knobs, self.n_moves)
        return lg.masked_fill(~mask, -1e9)


class CentralCritic(nn.Module):
    """Centralized critic: global state -> value."""

    def __init__(self, state_dim: int, hidden: int):
        super().__init__()
        self.net = _mlp(state_dim, 1, hidden, out_gain=1.0)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state).squeeze(-1)


@dataclass
class _Rollout:
    """Transitions of one rollout, stored as numpy arrays (time-major: [T, W, ...])."""

    obs: list            # per agent: [T, W, obs_dim_i]
    masks: list          # per agent: [T, W, k_i, n_moves] bool
    actions: list        # per agent: [T, W, k_i] int (index into moves)
    logps: np.ndarray    # [T, W] joint log-prob (sum over agents and knobs)
    agent_logps: list    # per agent: [T, W]
    states: np.ndarray   # [T, W, state_dim]
    rewards: np.ndarray  # [T, W]
    values: np.ndarray   # [T, W]
    last_value: np.ndarray  # [W]


@dataclass
class WalkResult:
    """What a rollout visited: unique valid points and their (reward-scale) scores."""

    points: np.ndarray            # [n, K] int
    scores: np.ndarray            # [n] normalized throughput (surrogate or measured)
    invalid_moves: int = 0
    mean_reward: float = 0.0
    walkers: np.ndarray | None = None  # [n] which walker visited each point


class MAPPO:
    """The agents (one actor per knob group) and the centralized critic.

    Parameters
    ----------
    groups: for each agent, the indices of the knobs it owns (disjoint, covering all).
    n_knobs: total number of knobs in the state.
    context_dim: length of the context vector.
    cfg: hyperparameters.
    seed: the one seed.
    """

    def __init__(self, groups: list, n_knobs: int, context_dim: int, cfg: MAPPOConfig | None = None,
                 seed: int = 0, names: list | None = None):
        self.cfg = cfg or MAPPOConfig()
        self.groups = [list(g) for g in groups]
        self.names = names or [f"agent{i}" for i in range(len(groups))]
        self.n_knobs, self.context_dim = n_knobs, context_dim
        self.n_moves = len(self.cfg.moves)
        self.moves = np.array(self.cfg.moves, dtype=np.int64)
        torch.set_num_threads(self.cfg.torch_threads)
        self.gen = torch.Generator().manual_seed(child_seed(seed, "mappo", "sample"))
        torch.manual_seed(child_seed(seed, "mappo", "init"))
        self.actors = nn.ModuleList([
            Actor(len(g) + context_dim + 2, len(g), self.n_moves, self.cfg.hidden) for g in self.groups
        ])
        self.state_dim = n_knobs + context_dim + 3
        self.critic = CentralCritic(self.state_dim, self.cfg.hidden)
        params = list(self.actors.parameters()) + list(self.critic.parameters())
        self.opt = torch.optim.Adam(params, lr=self.cfg.lr, eps=1e-5)
        self.rng = np.random.default_rng(child_seed(seed, "mappo", "minibatch"))
        self.buffer: list[_Rollout] = []
        self.updates = 0
        self.last_metrics: dict = {}

    # ---------------------------------------------------------------- observations
    def _observe(self, pos, dims, context, t_frac, cur, best):
        """Per-agent observations and the global state for positions ``pos`` [W, K]."""
        W = len(pos)
        dims = np.broadcast_to(dims, pos.shape)
        norm = pos / np.maximum(dims - 1, 1)
        ctx = np.broadcast_to(context, (W, self.context_dim))
        tcol = np.full((W, 1), t_frac)
        obs = [np.concatenate([norm[:, g], ctx, tcol, cur[:, None]], axis=1).astype(np.float32)
               for g in self.groups]
        state = np.concatenate([norm, ctx, tcol, cur[:, None], best[:, None]], axis=1).astype(np.float32)
        masks = []
        for g in self.groups:
            p = pos[:, g][:, :, None] + self.moves[None, None, :]
            masks.append((p >= 0) & (p < dims[:, g][:, :, None]))
        return obs, masks, state

    # --------------------------------------------------------------------- rollout
    @torch.no_grad()
    def rollout(self, dims, starts, context, score_fn, valid_fn, greedy: bool = False) -> WalkResult:
        """Walk ``len(starts)`` walkers for ``walk_length`` steps; store transitions.

        dims: [K] (or [W, K], per walker) number of choices per knob.
        starts: [W, K] valid start points.
        score_fn: ``(points [W, K], walker indices [W]) -> normalized throughput [W]``.
        valid_fn: ``(point tuple, walker index) -> bool`` (space constraints).
        Walkers may explore different tasks (co-design): the walker index tells which.
        """
        cfg = self.cfg
        dims = np.asarray(dims, dtype=np.int64)
        pos = np.array(starts, dtype=np.int64)
        W, T = len(pos), cfg.walk_length
        walkers = np.arange(W)
        cur = np.asarray(score_fn(pos, walkers), dtype=np.float64)
        best = cur.copy()
        seen: dict = {(int(w), tuple(p)): s for w, p, s in zip(walkers, pos, cur)}
        store = dict(obs=[[] for _ in self.groups], masks=[[] for _ in self.groups],
                     actions=[[] for _ in self.groups], agent_logps=[[] for _ in self.groups],
                     logps=[], states=[], rewards=[], values=[])
        invalid = 0
        for t in range(T):
            obs, masks, state = self._observe(pos, dims, context, t / T, cur, best)
            value = self.critic(torch.from_numpy(state)).numpy()
            delta = np.zeros_like(pos)
            joint_logp = np.zeros(W)
            for a, (actor, g) in enumerate(zip(self.actors, self.groups)):
                lg = actor.logits(torch.from_numpy(obs[a]), torch.from_numpy(masks[a]))
                dist = torch.distributions.Categorical(logits=lg)
                act = lg.argmax(-1) if greedy else torch.multinomial(
                    dist.probs.view(-1, self.n_moves), 1, generator=self.gen).view(W, len(g))
                lp = dist.log_prob(act).sum(-1).numpy()
                joint_logp += lp
                delta[:, g] = self.moves[act.numpy()]
                store["obs"][a].append(obs[a])
                store["masks"][a].append(masks[a])
                store["actions"][a].append(act.numpy())
                store["agent_logps"][a].append(lp)
            new = pos + delta
            ok = np.array([valid_fn(tuple(p), w) for w, p in enumerate(new)])
            invalid += int((~ok).sum())
            new[~ok] = pos[~ok]
            scores = np.asarray(score_fn(new, walkers), dtype=np.float64)
            reward = np.where(ok, scores, -cfg.invalid_penalty)
            for w in np.flatnonzero(ok):
                seen[(int(w), tuple(new[w]))] = scores[w]
            pos, cur = new, scores
            best = np.maximum(best, cur)
            store["logps"].append(joint_logp)
            store["states"].append(state)
            store["rewards"].append(reward)
            store["values"].append(value)
        _, _, last_state = self._observe(pos, dims, context, 1.0, cur, best)
        last_value = self.critic(torch.from_numpy(last_state)).numpy()
        if not greedy:
            self.buffer.append(_Rollout(
                obs=[np.stack(o) for o in store["obs"]],
                masks=[np.stack(m) for m in store["masks"]],
                actions=[np.stack(a) for a in store["actions"]],
                logps=np.stack(store["logps"]),
                agent_logps=[np.stack(lp) for lp in store["agent_logps"]],
                states=np.stack(store["states"]),
                rewards=np.stack(store["rewards"]),
                values=np.stack(store["values"]),
                last_value=last_value,
            ))
        keys = list(seen.keys())
        pts = np.array([k[1] for k in keys], dtype=np.int64).reshape(-1, pos.shape[1])
        return WalkResult(pts, np.array(list(seen.values())), invalid,
                          float(np.mean(store["rewards"])),
                          np.array([k[0] for k in keys], dtype=np.int64))

    # ---------------------------------------------------------------------- update
    def update(self) -> dict:
        """PPO update on every stored rollout (then the buffer is cleared)."""
        if not self.buffer:
            return {}
        cfg = self.cfg
        # GAE per rollout, with the centralized critic's values
        flat = {k: [] for k in ("states", "returns", "adv")}
        flat_obs = [[] for _ in self.groups]
        flat_masks = [[] for _ in self.groups]
        flat_act = [[] for _ in self.groups]
        flat_lp = [[] for _ in self.groups]
        for ro in self.buffer:
            T = len(ro.rewards)
            adv = np.zeros_like(ro.rewards)
            last = np.zeros(ro.rewards.shape[1])
            for t in reversed(range(T)):
                nxt = ro.last_value if t == T - 1 else ro.values[t + 1]
                delta = ro.rewards[t] + cfg.gamma * nxt - ro.values[t]
                last = delta + cfg.gamma * cfg.gae_lambda * last
                adv[t] = last
            flat["states"].append(ro.states.reshape(-1, self.state_dim))
            flat["returns"].append((adv + ro.values).reshape(-1))
            flat["adv"].append(adv.reshape(-1))
            for a in range(len(self.groups)):
                flat_obs[a].append(ro.obs[a].reshape(-1, ro.obs[a].shape[-1]))
                flat_masks[a].append(ro.masks[a].reshape(-1, *ro.masks[a].shape[2:]))
                flat_act[a].append(ro.actions[a].reshape(-1, ro.actions[a].shape[-1]))
                flat_lp[a].append(ro.agent_logps[a].reshape(-1))
        states = torch.from_numpy(np.concatenate(flat["states"]))
        returns = torch.from_numpy(np.concatenate(flat["returns"]).astype(np.float32))
        adv = np.concatenate(flat["adv"]).astype(np.float32)
        adv = torch.from_numpy((adv - adv.mean()) / (adv.std() + 1e-8))
        obs = [torch.from_numpy(np.concatenate(o)) for o in flat_obs]
        masks = [torch.from_numpy(np.concatenate(m)) for m in flat_masks]
        acts = [torch.from_numpy(np.concatenate(x)) for x in flat_act]
        old_lp = [torch.from_numpy(np.concatenate(x).astype(np.float32)) for x in flat_lp]
        n = len(states)
        stats = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clipfrac": 0.0}
        steps = 0
        for _ in range(cfg.epochs):
            order = self.rng.permutation(n)
            for lo in range(0, n, cfg.minibatch):
                idx = torch.from_numpy(order[lo: lo + cfg.minibatch])
                pg_loss = torch.zeros(())
                ent = torch.zeros(())
                kl = torch.zeros(())
                clipfrac = torch.zeros(())
                for a, actor in enumerate(self.actors):
                    lg = actor.logits(obs[a][idx], masks[a][idx])
                    dist = torch.distributions.Categorical(logits=lg)
                    lp = dist.log_prob(acts[a][idx]).sum(-1)
                    ratio = torch.exp(lp - old_lp[a][idx])
                    mb_adv = adv[idx]
                    l1 = -mb_adv * ratio
                    l2 = -mb_adv * torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip)
                    pg_loss = pg_loss + torch.max(l1, l2).mean()
                    ent = ent + dist.entropy().sum(-1).mean()
                    with torch.no_grad():
                        kl = kl + ((ratio - 1) - torch.log(ratio)).mean()
                        clipfrac = clipfrac + ((ratio - 1).abs() > cfg.clip).float().mean()
                v = self.critic(states[idx])
                v_loss = 0.5 * ((v - returns[idx]) ** 2).mean()
                loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(
                    list(self.actors.parameters()) + list(self.critic.parameters()), cfg.max_grad_norm)
                self.opt.step()
                na = len(self.actors)
                stats["policy_loss"] += float(pg_loss.detach()) / na
                stats["value_loss"] += float(v_loss.detach())
                stats["entropy"] += float(ent.detach()) / na
                stats["approx_kl"] += float(kl) / na
                stats["clipfrac"] += float(clipfrac) / na
                steps += 1
        self.buffer.clear()
        self.updates += 1
        self.last_metrics = {f"losses/{k}": v / max(steps, 1) for k, v in stats.items()}
        self.last_metrics["charts/transitions"] = n
        return self.last_metrics

    def describe(self) -> dict:
        return {"agents": {n: g for n, g in zip(self.names, self.groups)}, "config": asdict(self.cfg)}
