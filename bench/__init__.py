"""Side-by-side benchmarks of vtx against what a user would use instead; `python -m bench`
reruns them all and writes bench/RESULTS.md."""
