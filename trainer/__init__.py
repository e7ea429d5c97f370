"""vtx trainer: fine-tunes Hugging Face causal LMs inside Vertex AI CustomJobs."""

import warnings

# google.api_core warns on every import, in every process, that it will drop Python 3.11 in
# 2027; in a job's logs that is one screenful per replica start (every restart prints it
# again), and says nothing about the run. Other FutureWarnings still show.
warnings.filterwarnings(
    "ignore", message=r".*Python version.*", category=FutureWarning, module=r"google\.api_core\."
)
