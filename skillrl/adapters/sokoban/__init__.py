"""The cold-started Sokoban policy: a LoRA adapter over the embedded SmolLM2-135M-Instruct.

It plays 6x6 one-box rooms from pages that state positions; ``skillrl.json`` beside it holds
its recipe and figures.
"""
