"""The model: tokenizer and weights loaded or built (`loading`), its bucketed causal attention
(`attention`), the loss computed without the logits (`chunked_loss`), and the Hugging Face model
directory a run delivers (`export`)."""
