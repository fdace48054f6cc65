"""A point's results as a pure function of what measuring it captured."""
