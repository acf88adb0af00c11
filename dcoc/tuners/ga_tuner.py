"""GATuner: AutoTVM's genetic algorithm.

Source: ``python/tvm/autotvm/tuner/ga_tuner.py`` (TVM <= 0.19).  A gene is the vector of
choice indices of a config.  Each generation measures ``pop_size`` genes; the next
generation keeps the ``elite_num`` best (elitism), fills the rest by fitness-proportional
selection of two parents, one-point crossover and per-gene mutation with probability
``mutation_prob``; children already visited are re-mutated (bounded tries).
Fitness = task FLOP / cost (0 for failed configs), as AutoTVM's.
"""
from __future__ import annotations

import numpy as np

from dcoc.tuners.tuner import Tuner


class GATuner(Tuner):
    name = "ga"

    def __init__(self, task, seed=0, pop_size=100, elite_num=3, mutation_prob=0.1, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self.pop_size = int(min(pop_size, len(self.space)))
        self.elite_num = int(min(elite_num, self.pop_size))
        self.mutation_prob = float(mutation_prob)
        self.dims = np.array(self.space.dims)
        # initial population: random proposable genes
        self.genes: list[tuple] = []
        self._init_population()
        self.scores: list[float] = []
        self.trial_pt = 0
        self.elites: list[tuple] = []
        self.elite_scores: list[float] = []

    def _init_population(self):
        seen, tries = set(), 0
        while len(self.genes) < self.pop_size and tries < 50 * self.pop_size:
            tries += 1
            p = self.space.sample_point(self.rng)
            if p in seen:
                continue
            cfg = self.space.config(p)
            if self.proposable(cfg):
                seen.add(p)
                self.genes.append(p)
        self.pop_size = max(1, len(self.genes))

    def next_batch(self, batch_size):
        out = []
        while len(out) < batch_size and self.trial_pt < len(self.genes):
            gene = self.genes[self.trial_pt]
            self.trial_pt += 1
            cfg = self.space.config(gene)
            if not self.is_visited(cfg) and cfg not in out:
                out.append(cfg)
            else:  # duplicates inside a generation count as unfit
                self.scores.append(0.0)
        return out

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            self.scores.append(self.task.flop / res.cost if res.valid and res.cost > 0 else 0.0)
        if len(self.scores) >= len(self.genes) and self.trial_pt >= len(self.genes):
            self._next_generation()

    def _next_generation(self):
        genes = self.genes + self.elites
        scores = np.array(self.scores[: len(self.genes)] + self.elite_scores, dtype=float)
        # elitism
        order = np.argsort(-scores)
        self.elites = [genes[i] for i in order[: self.elite_num]]
        self.elite_scores = [float(scores[i]) for i in order[: self.elite_num]]
        # fitness-proportional selection
        probs = scores.copy()
        if probs.sum() <= 0:
            probs = np.ones_like(probs)
        probs = probs / probs.sum()
        new, seen = [], set()
        tries = 0
        while len(new) < self.pop_size and tries < 100 * self.pop_size:
            tries += 1
            p1, p2 = self.rng.choice(len(genes), size=2, p=probs)
            point = int(self.rng.integers(len(self.dims))) if len(self.dims) > 1 else 0
            child = list(genes[p1][:point]) + list(genes[p2][point:])
            for d in range(len(child)):  # mutation
                if self.rng.random() < self.mutation_prob:
                    child[d] = int(self.rng.integers(self.dims[d]))
            child = tuple(int(c) for c in child)
            if child in seen:
                continue
            cfg = self.space.config(child)
            if self.proposable(cfg):
                seen.add(child)
                new.append(child)
        if not new:  # population collapsed: restart from random genes
            self.genes = []
            self._init_population()
        else:
            self.genes = new
        self.scores = []
        self.trial_pt = 0
