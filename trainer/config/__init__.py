"""What a training process is told, read without torch: the YAML config (`schema`), its command
line (`arguments`), the platform's environment (`env`), the secrets it names (`secrets`) and the
GPU facts its checks and estimates need (`accelerators`)."""
