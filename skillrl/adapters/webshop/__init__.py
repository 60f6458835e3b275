"""The cold-started WebShop policy: a LoRA adapter over the embedded SmolLM2-135M-Instruct.

``skillrl.json`` beside it holds its recipe and figures.
"""
