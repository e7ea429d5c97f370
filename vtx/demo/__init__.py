"""`vtx demo`: the main job on the embedded local platform, through a preemption (training.py),
then its model registered, deployed, asked one question and undeployed (serving.py)."""
