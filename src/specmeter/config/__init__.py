"""Configuration: the validated models of what to speculate with, which engine, what load, and how files and
flags become them."""
