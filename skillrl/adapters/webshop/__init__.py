"""The cold-started WebShop policy: a LoRA adapter over the embedded SmolLM2-135M-Instruct (skillrl.json: its recipe and figures)."""
