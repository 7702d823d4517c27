"""Choosing the actions for one pool (README: How a plan is made, seed 001's pre-check generalised).

One cluster model, and around it small parts with one job each (as in Cruise Control's analyzer, where goals veto
the actions that would break them):

- `state`: the model being changed (assignment, leaders, per-broker loads), the log of actions and the budgets
  used; every change is applied, undone and counted there;
- `constraints`: the hard constraints (placement rules, budgets, capacity thresholds) and the acceptance rule
  (no balanced resource pushed out of its band): checks that veto an action, never choose one;
- `ranking`: best fit, the order in which an action tries its candidates;
- `spread`: the topic spread's caps per (topic, broker), a rule the constraints ask like the placement rules;
- `actions`: leadership transfer, replica move, swap, two-for-one exchange (counts), `hot_spread`: hot-partition
  spread, and `forced`: forced placement, each proposing one change and making it when the constraints accept;
- `strategy`: the `Planner`, which orders them: forced moves first, then per balanced resource in priority order
  the brokers outside the band, into the target band, cheapest action first; then `refine` makes the plan
  smaller, `exact` polishes a small pool's plan with a MILP (HiGHS), and what stays outside is explained (notes,
  infeasibility proofs, the lower bound of data moved).
"""

from kafka_rebalancer.plan.balance.planner.constraints import Budgets
from kafka_rebalancer.plan.balance.planner.exact import ExactLimits
from kafka_rebalancer.plan.balance.planner.state import LEADERSHIP, REPLICA, Move, PoolPlan
from kafka_rebalancer.plan.balance.planner.strategy import Planner

__all__ = ["LEADERSHIP", "REPLICA", "Budgets", "ExactLimits", "Move", "Planner", "PoolPlan"]
