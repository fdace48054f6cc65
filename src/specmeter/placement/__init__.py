"""Which server runs where on one node: the GPUs a run may use (inventory), what each server needs and the plan's
configurations placed (servers), and the pure rule that decides it (place)."""
