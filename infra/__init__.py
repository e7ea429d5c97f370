"""The vtx Pulumi program (``__main__.py``), its components and the offline runner."""
