"""LLM pipeline: proxy loss trajectories, clustering, upsampling, LoRA fine-tuning, evaluation."""
