"""The planner: search space, funnel (memory, analytic bounds, simulation), fleet sizing and
verification, the judge, levers, what-ifs and the explanation of a plan."""
