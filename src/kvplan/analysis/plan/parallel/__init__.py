"""Data / expert parallelism in the planner: which DP x EP pools the space holds, how one
DP group is simulated (the lockstep fleet), and the DP / EP what-ifs (docs/planner.md)."""
