"""The command groups, one module each: they parse options, call jobs/ and infra/, and print
through views/. No command imports another: what two commands share is a flow (flows/)."""
