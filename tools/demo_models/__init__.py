"""The demo target/draft pair's training, one module per stage (tools/train_demo_models.py runs it).

common (vocabulary, chat format, budgets) < corpus < examples; tokenizer; model; distill < train;
acceptance (shared with tools/measure_demo_models.py); readme; pipeline runs them all in order.
The EAGLE-3 head for the pair's target (tools/train_demo_eagle3.py): eagle3 (the head) < eagle3_train.
"""
