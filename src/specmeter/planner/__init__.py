"""Where speculation would pay where nobody measured: acceptance profiles, a step-cost model calibrated on a
run's points, predictions per drafter, K and batch size, and the roofline estimate made before any run."""
