"""The training data: examples read and tokenized, packed into rows, laid out in length buckets
and streamed per rank from a resumable position (`batches`)."""
