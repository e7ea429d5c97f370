"""`vtx review`: a two-minute read of what a stack will create, and whether it may."""
