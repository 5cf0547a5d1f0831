"""benchmarks/reproduce-cifar10's parts: the published table (configs), one qflow-train run and
its state on disk (runs), the command line of a run (launch), the warm-up and time estimate
(estimate) and the results table (table)."""
