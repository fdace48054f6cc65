"""Where speculation would pay where nobody measured.

From measurements: acceptance profiles (acceptance), a run's points as engine steps (observations), the
step-cost model and its fit (stepcost, calibration), predictions and checks (predict), recommend's table filled
beyond the measured batches (tables), and where a load search measures next (search, search_model, placement).
Before any run: GPU presets (hardware), model shapes from config.json (model_shape, checkpoint), KV memory
(kv_memory) and the roofline estimate (roofline)."""
