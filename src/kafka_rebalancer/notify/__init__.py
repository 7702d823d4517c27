"""Telling people: what each kind of message says (messages.py), sending it on the configured channels through
Airflow's provider notifiers, bounded and never raising (channels.py), once per run and occasion, with what was
sent or failed recorded (outbox.py)."""
