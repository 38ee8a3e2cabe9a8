"""The application: the vision layer's service over the desktops (service.py: Glassdesk, which the
doors call), the whole catalogue of operations the doors are generated from (ops.py) and the
server's Prometheus metrics (metrics.py)."""
