"""Who holds what: the pools a run holds from its snapshot to its report (claims.py), and the lock a pool's
execution holds while it changes the cluster (execution_lock.py)."""
