"""Who may do what: service accounts and grants (`identity.py`), the customer-managed key
(`kms.py`), secrets (`secret_manager.py`), the CI identity (`ci.py`)."""
