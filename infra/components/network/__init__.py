"""The network the jobs run in: the VPC and its egress (`network.py`), a Shared VPC host project
(`shared_vpc.py`), a VPC Service Controls perimeter (`perimeter.py`)."""
