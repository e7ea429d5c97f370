"""Where a run's numbers go: structured JSON logs and throughput (`metrics`), the terminal's
progress bar (`progress`), and the reporters behind one `log(step, metrics)`: TensorBoard,
Weights & Biases (`wandb_run`) and a tuning trial's metric file (`trial_metric`)."""
