"""`python -m kafka_rebalancer.cli`: the same command as `kafka-rebalancer`."""

import sys

from kafka_rebalancer.cli import main

sys.exit(main())
