"""RLTuner: CHAMELEON's "adaptive exploration" -- a single PPO agent walks the knob space.

Source: CHAMELEON (Ahn et al., "Chameleon: Adaptive Code Optimization for Expedited Deep
Neural Network Compilation", ICLR 2020), official code https://github.com/anony-sub/chameleon
(``chameleon/tuner/rl_tuner.py``, ``rl_model_optimizer.py``,
``reinforcement_learning/ppo_core.py``), and its precursor ReLeASE
(https://github.com/he-actlab/release).  This is the single-agent RL baseline, *without*
adaptive sampling (that is :mod:`dcoc.tuners.chameleon_tuner`).

The tuner is AutoTVM's model-based loop (:class:`~dcoc.tuners.model_based.ModelBasedTuner`)
with an XGBoost **regression** cost model (``loss_type="reg"`` as CHAMELEON: the rewards
need the predicted throughput, not a rank) and :class:`RLOptimizer` in place of simulated
annealing:

* **Walks.** Each plan starts ``n_starts`` walks from random points.  Observation = knob
  indices divided by the knob sizes; action = one of {-1, 0, +1} per knob (clipped at the
  ends).  A walk ends after ``max_steps`` steps or when at least 75% of the knobs are
  "saturated or unchanged" (action 0, or pushed against an end).
* **Rewards.** Every point a walk visits is scored by the cost model; the predicted scores
  are the rewards, and every visited point is offered to a top-k heap of unvisited,
  feasible points: the plan.
* **Agent** (:class:`Agent`, CleanRL layout): policy = 2 x 20 tanh trunk, then per knob
  Dense(3, tanh) -> Dense(3, tanh) -> divide by the temperature 0.1 -> Dense(3) -> softmax;
  separate value net 3 x 20 tanh -> 1 (``ppo_core.py``; its older ``ppo.py`` has 2 layers).
* **PPO update** (``ppo_core.PPOAgent.observe_all_and_learn``): GAE (gamma 0.9, lambda
  0.99) with advantages normalized, value target ``r + gamma * V(s')`` (0 after the last
  step), per-knob clipped ratios (clip 0.2) summed over knobs, entropy bonus 0.3 per knob,
  value coefficient 1.0, Adam lr 1e-3 (eps 1e-5); 3 epochs, each one minibatch of 32
  transitions drawn with replacement *per walk*.

Deviations, all for speed (the official code runs 128 walks one after another, one
TensorFlow call per step):

* walks run ``n_envs`` at a time as one batch, and the agent learns after each batch of
  walks from all their transitions (``update_epochs * n_walks`` minibatches, so the number
  of gradient steps per walk is the official one); the probability ratios use the
  log-probabilities stored at rollout time (standard PPO) instead of a copy of the policy
  taken at learning time.

The walk budget is the paper's: ``n_starts=128`` walks of up to ``max_steps=500`` steps per
plan (``PPOConfig()``; ``n_starts`` is capped by the space size).  Walks rarely reach 500
steps: the 75% stop rule ends most of them.

Warm-up: the shared initial sample of :mod:`dcoc.tuners.warmup` (the same ``n_init`` = 8
random configs DCOC and XGB measure first), then the model acts (``n_init=None``:
CHAMELEON's own ``plan_size`` random trials).

Every hyperparameter lives once in :class:`PPOConfig`.  One seed: torch weights come from a
local ``torch.Generator`` seeded with ``child_seed(seed, ...)``, action sampling and
minibatch draws from a numpy Generator derived from the same seed; torch runs with one
thread inside the optimizer (restored afterwards).

Why this is not :mod:`dcoc.method.mappo`: that module is DCOC's own method (several agents
under centralized training, decentralized execution); this one reproduces a *baseline*,
CHAMELEON's single agent, and must stay what CHAMELEON ran.  The two share only the PPO
clipped objective with GAE; everything the comparison depends on differs:

=====================  ==========================================  ===========================================
                       ``rl`` / ``chameleon`` (here)               ``dcoc`` (:class:`dcoc.method.mappo.MAPPO`)
=====================  ==========================================  ===========================================
agents                 one policy over every knob                  one actor per knob group + a central critic
observation            knob positions / sizes                      own knobs, context, ``t/T``, current score
network                per-knob Dense(3) heads with temperature    plain 2-layer MLPs, orthogonal init
                       0.1, glorot init, 3-layer value net
walk                   until 75% of knobs saturated/unchanged      a fixed ``walk_length``; moves off the ends
                       (or 500 steps); moves clipped at the ends;  masked; a move into an invalid config is
                       constraints only filter the plan            undone and penalised
reward                 the cost model's predicted score            throughput normalized by the best measured
update                 after each group of walks; minibatches      after each round; permuted minibatches,
                       drawn with replacement, no grad clipping    gradient clipping
random streams         numpy inverse-CDF action draws              ``torch.multinomial`` with a torch Generator
=====================  ==========================================  ===========================================

Folding this onto :class:`~dcoc.method.mappo.MAPPO` (one agent owning every knob) would
change the network, the walks, the rewards and the random streams, hence every ``rl`` and
``chameleon`` result for a seed; the baselines of docs/RESULTS.md would no longer be
CHAMELEON's.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from dcoc.seeding import child_rng, child_seed
from dcoc.tuners.model_based import ModelBasedTuner, ModelOptimizer, PointCodec, TopK, default_cost_model


# ============================================================================ config
@dataclass(frozen=True)
class PPOConfig:
    """Every hyperparameter of the RL exploration, declared once."""

    # --- walks (adaptive exploration)
    n_starts: int = 128         # walks (random start points) per plan (paper: 128)
    max_steps: int = 500        # steps per walk at most (paper: 500)
    n_envs: int = 16            # walks rolled out together; the agent learns after each group
    stop_fraction: float = 0.75  # a walk ends when this fraction of knobs is saturated/unchanged
    # --- network
    hidden: int = 20            # width of the policy trunk (2 layers) and value net layers
    value_layers: int = 3       # tanh layers of the value net (ppo_core.py: 3)
    temperature: float = 0.1    # the policy head divides by this before its last Dense
    # --- PPO
    learning_rate: float = 1e-3
    adam_eps: float = 1e-5
    update_epochs: int = 3      # epochs per update; each draws one minibatch per walk
    minibatch_size: int = 32
    gamma: float = 0.9
    gae_lambda: float = 0.99
    clip_coef: float = 0.2
    vf_coef: float = 1.0
    ent_coef: float = 0.3
    norm_adv: bool = True


# ============================================================================= agent
def _dense(n_in: int, n_out: int, generator) -> nn.Linear:
    """A Dense layer initialized as TF's default (glorot-uniform weights, zero bias)."""
    layer = torch.nn.utils.skip_init(nn.Linear, n_in, n_out)  # no draw from torch's global RNG
    nn.init.xavier_uniform_(layer.weight, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


class Agent(nn.Module):
    """Policy with one 3-way softmax head per knob (actions -1/0/+1), and a separate value net."""

    def __init__(self, n_knobs: int, cfg: PPOConfig, generator: torch.Generator):
        super().__init__()
        h, k = cfg.hidden, n_knobs
        self.temperature = cfg.temperature
        self.trunk = nn.Sequential(_dense(k, h, generator), nn.Tanh(), _dense(h, h, generator), nn.Tanh())
        # the per-knob heads Dense(3, tanh) -> Dense(3, tanh) -> /T -> Dense(3) as batched
        # weights of shape (knob, in, out)
        w = [torch.empty(k, h, 3), torch.empty(k, 3, 3), torch.empty(k, 3, 3)]
        for t in w:
            for i in range(k):
                nn.init.xavier_uniform_(t[i], generator=generator)
        self.w1, self.w2, self.w3 = (nn.Parameter(t) for t in w)
        self.b1, self.b2, self.b3 = (nn.Parameter(torch.zeros(k, 3)) for _ in range(3))
        layers, n_in = [], k
        for _ in range(cfg.value_layers):
            layers += [_dense(n_in, h, generator), nn.Tanh()]
            n_in = h
        self.critic = nn.Sequential(*layers, _dense(n_in, 1, generator))

    def get_value(self, obs):
        return self.critic(obs).squeeze(-1)

    def get_logits(self, obs):
        z = self.trunk(obs)                                                  # (B, h)
        z = torch.tanh(torch.einsum("bh,kho->bko", z, self.w1) + self.b1)    # (B, K, 3)
        z = torch.tanh(torch.einsum("bki,kio->bko", z, self.w2) + self.b2)
        return torch.einsum("bki,kio->bko", z / self.temperature, self.w3) + self.b3

    def get_action_and_value(self, obs, action=None):
        """Action probabilities (B, K, 3); per-knob log-probs of ``action`` and entropies
        (B, K); the value (B,)."""
        logp_all = torch.log_softmax(self.get_logits(obs), dim=-1)
        probs = logp_all.exp()
        entropy = -(probs * logp_all).sum(-1)
        logp = None if action is None else logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return probs, logp, entropy, self.get_value(obs)


@contextlib.contextmanager
def _torch_threads(n: int):
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


# ========================================================================= optimizer
class RLOptimizer(ModelOptimizer):
    """CHAMELEON's ``ReinforcementLearningOptimizer``: PPO walks over the cost model.

    ``find_maximums(model, num, exclusive)`` runs ``cfg.n_starts`` walks from fresh random
    points (not persistent, as the official code), learning as it goes, and returns the
    ``num`` best unvisited points any walk (or start) touched.  The agent persists across
    calls, so it keeps improving over the tuning run.
    """

    def __init__(self, codec: PointCodec, seed: int, cfg: PPOConfig | None = None):
        self.codec = codec
        self.cfg = cfg or PPOConfig()
        self.rng = child_rng(seed, "rl", "numpy")
        self.torch_seed = child_seed(seed, "rl", "torch")
        self.dims = codec.dims
        self.agent = None
        self.optim = None
        # metrics of the last find_maximums (CleanRL-style stable names)
        self.stats: dict = {}

    def _ensure_agent(self):
        if self.agent is None:
            gen = torch.Generator().manual_seed(self.torch_seed)
            self.agent = Agent(len(self.dims), self.cfg, gen)
            kw = {"lr": self.cfg.learning_rate, "eps": self.cfg.adam_eps}
            try:  # the fused CPU kernel (torch >= 2.4) halves the update cost of tiny nets
                self.optim = torch.optim.Adam(self.agent.parameters(), fused=True, **kw)
            except (RuntimeError, TypeError):
                self.optim = torch.optim.Adam(self.agent.parameters(), foreach=True, **kw)

    # ------------------------------------------------------------------ rollout
    def rollout(self, starts: np.ndarray) -> dict:
        """Walk from each start point until the stop rule or ``max_steps``.

        Returns time-major arrays (T, E, ...): ``obs``, ``actions``, ``logp`` (per knob),
        ``values``, ``points`` (the point reached by each step) and ``alive`` (the step
        exists), for E = len(starts) walks of at most T steps.
        """
        cfg, dims = self.cfg, self.dims
        e, k = starts.shape
        pos = starts.copy()
        alive = np.ones(e, dtype=bool)
        need = cfg.stop_fraction * k
        buf = {"obs": [], "actions": [], "logp": [], "values": [], "points": [], "alive": []}
        for _ in range(cfg.max_steps):
            obs = (pos / dims).astype(np.float32)
            with torch.no_grad():
                probs, _, _, value = self.agent.get_action_and_value(torch.from_numpy(obs))
            probs = probs.numpy().astype(np.float64)
            # sample one action per knob by inverse CDF with the numpy generator
            u = self.rng.random((e, k, 1))
            action = (probs.cumsum(-1) < u).sum(-1).clip(0, 2)
            logp = np.log(np.take_along_axis(probs, action[..., None], -1)[..., 0] + 1e-12)
            new = np.clip(pos + action - 1, 0, dims - 1)
            good = (action == 1) | ((action == 0) & (new == 0)) | ((action == 2) & (new == dims - 1))
            done = good.sum(1) >= need
            for key, val in (("obs", obs), ("actions", action), ("logp", logp),
                             ("values", value.numpy()), ("points", new), ("alive", alive.copy())):
                buf[key].append(val)
            pos = np.where(alive[:, None], new, pos)
            alive &= ~done
            if not alive.any():
                break
        return {key: np.stack(v) for key, v in buf.items()}

    # ------------------------------------------------------------------- update
    def learn(self, traj: dict, rewards: np.ndarray) -> None:
        """One PPO update from a group of walks (rewards: (T, E) predicted scores)."""
        cfg = self.cfg
        alive, values = traj["alive"], traj["values"]
        t_len, e = alive.shape
        # value of the next state in the same walk; 0 after its last step
        next_alive = np.concatenate([alive[1:], np.zeros((1, e), dtype=bool)])
        next_values = np.where(next_alive, np.concatenate([values[1:], np.zeros((1, e))]), 0.0)
        deltas = rewards + cfg.gamma * next_values - values
        adv = np.zeros_like(deltas)
        last = np.zeros(e)
        for t in reversed(range(t_len)):
            last = deltas[t] + cfg.gamma * cfg.gae_lambda * last * next_alive[t]
            adv[t] = last
        targets = rewards + cfg.gamma * next_values

        m = alive.reshape(-1)
        b_obs = torch.from_numpy(traj["obs"].reshape(t_len * e, -1)[m])
        b_act = torch.from_numpy(traj["actions"].reshape(t_len * e, -1)[m].astype(np.int64))
        b_logp = torch.from_numpy(traj["logp"].reshape(t_len * e, -1)[m].astype(np.float32))
        b_adv = adv.reshape(-1)[m]
        if cfg.norm_adv and len(b_adv) > 1:
            b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
        b_adv = torch.from_numpy(b_adv.astype(np.float32))
        b_tgt = torch.from_numpy(targets.reshape(-1)[m].astype(np.float32))
        n = len(b_adv)
        n_walks = int(alive[0].sum())

        for _epoch in range(cfg.update_epochs):
            for _mb in range(n_walks):
                idx = torch.from_numpy(self.rng.integers(0, n, size=cfg.minibatch_size))
                _, logp, entropy, value = self.agent.get_action_and_value(b_obs[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()                               # (mb, K)
                adv_mb = b_adv[idx].unsqueeze(-1)
                pg = torch.min(adv_mb * ratio,
                               adv_mb * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef))
                pg_objective = pg.mean(0).sum()                                  # summed over knobs
                ent_objective = entropy.mean(0).sum()
                v_loss = ((value - b_tgt[idx]) ** 2).mean()
                loss = -(pg_objective + cfg.ent_coef * ent_objective) + cfg.vf_coef * v_loss
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
        self.stats = {"losses/value_loss": v_loss.item(), "losses/entropy": ent_objective.item(),
                      "losses/policy_objective": pg_objective.item()}

    # -------------------------------------------------------------- find maxima
    def find_maximums(self, model, num, exclusive):
        cfg = self.cfg
        self._ensure_agent()
        n_starts = min(cfg.n_starts, self.codec.size)
        starts = self.codec.points(self.codec.sample(self.rng, n_starts))
        top = TopK(num, exclusive)
        top.push(model.predict(starts), self.codec.index(starts))
        steps, rewards_sum = 0, 0.0
        with _torch_threads(1):
            for g in range(0, n_starts, cfg.n_envs):
                traj = self.rollout(starts[g:g + cfg.n_envs])
                alive = traj["alive"]
                pts = traj["points"][alive]                     # (n_steps, K)
                scores = model.predict(pts)
                rewards = np.zeros(alive.shape)
                rewards[alive] = scores
                top.push(scores, self.codec.index(pts))
                self.learn(traj, rewards)
                steps += len(pts)
                rewards_sum += float(scores.sum())
        self.stats.update({"charts/steps": steps,
                           "charts/mean_reward": rewards_sum / max(steps, 1),
                           "charts/mean_walk_length": steps / max(n_starts, 1)})
        return top.result()[0]


# ============================================================================= tuner
class RLTuner(ModelBasedTuner):
    """Single-agent PPO exploration over the cost model (CHAMELEON without adaptive sampling).

    Parameters
    ----------
    task, seed: see :class:`~dcoc.tuners.tuner.Tuner`.
    plan_size: measurements per model refit (64).
    loss_type: XGBoost loss, ``"reg"`` (CHAMELEON) or ``"rank"``.
    ppo: a :class:`PPOConfig` (or a dict of overrides).
    diversity_filter_ratio: None (CHAMELEON's default) or r >= 1.
    eps: random fraction of each plan (0.05).
    num_threads: xgboost threads.
    """

    name = "rl"

    def __init__(self, task, seed=0, plan_size=64, loss_type="reg", ppo=None,
                 diversity_filter_ratio=None, eps=0.05, num_threads=1, **kwargs):
        super().__init__(task, seed=seed, plan_size=plan_size,
                         diversity_filter_ratio=diversity_filter_ratio, eps=eps, **kwargs)
        if isinstance(ppo, dict):
            ppo = PPOConfig(**ppo)
        self.ppo = ppo or PPOConfig()
        self.cost_model = default_cost_model(loss_type, child_seed(self.seed, self.name, "model"),
                                             self.plan_size, num_threads)
        self.optimizer = RLOptimizer(self.codec, child_seed(self.seed, self.name, task.workload_key),
                                     self.ppo)
