"""The run-directory workflows the commands call: what runs after what, and where each result is written."""
