"""Code the stack deploys to run on its own (Cloud Functions): each folder is one function's
whole source, zipped as it is; nothing in it imports the rest of the repository."""
