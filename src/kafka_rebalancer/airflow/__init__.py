"""The Airflow side of kafka-rebalancer, as a provider would ship it: the Kafka connection hook (hooks.py), the
approval operator (operators.py), the bodies of the DAGs' tasks (tasks.py) and the runs page (ui.py). The repo's
plugins/ and dags/ only register and wire them."""
