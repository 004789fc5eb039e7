"""Stochastic MuZero search on a graph: `mctx.stochastic_muzero_policy` plus graph
keywords. (Stochastic MuZero: Antonoglou, Schrittwieser, Ozair, Hubert, Silver,
"Planning in Stochastic Environments with a Learned Model", ICLR 2022.)

Decision nodes (states) and chance nodes (afterstates) live in one graph, keyed
apart: a decision node by `hash_fn(state)`, a chance node by
`afterstate_hash_fn(afterstate)`, each key with a node-type lane. So two moves
(from the same state or from different ones) that reach the same afterstate share
its chance node, and two chance outcomes that reach the same state share its
decision node.

Both node types follow the rules of Monte-Carlo Graph Search (KataGo's
"Monte-Carlo Graph Search from First Principles"): edge visits `N(n, e)` count
how often selection at `n` chose `e`, and every node on a playout's path is
recomputed idempotently, `N(n) = 1 + sum_e N(n, e)`,
`Q(n) = (U(n) + sum_e N(n, e) Q(n, e)) / N(n)`. At a chance node the edges are
outcomes and `U(n)` is the afterstate value, so `Q(n)` is the visit-weighted
expectation over its outcomes, as in mctx; the chance rule
`argmax_c P(c) / (N(n, c) + 1)` keeps the visits of each outcome close to
`P(c)` times the node's visits, so the weights approach the probabilities.

One module per part: `chance_nodes` (the wrapped `recurrent_fn`, the key and
the selection rule of each node type) and `stochastic_policy` (`stochastic_muzero_policy`).
"""

from mcgs_jax._src.stochastic.stochastic_policy import stochastic_muzero_policy

__all__ = ["stochastic_muzero_policy"]
