"""The serving container for an exported model: Vertex's serving environment (`env`), the
`:predict` body checked (`request`), the model loaded for generation (`served_model`) and the
HTTP server (`server`, started by `python -m trainer.serve`)."""
