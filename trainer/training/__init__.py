"""One training process: its command (`cli`), the loop (`loop`), SIGTERM as a collective stop
(`preemption`), host memory kept between steps (`allocator`), and `--estimate` (`estimate`,
with the run's length from its data in `sizing`)."""
