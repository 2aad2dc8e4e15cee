"""Several hosts on one machine: network namespaces, a load balancer, a host killed (issue 28).

``make multihost`` (``python -m tests.multihost``, as root) builds the hosts described in
:mod:`tests.multihost.topology`, runs the scenarios of :mod:`tests.multihost.scenarios` through
the balancer with the official SDK client (raw HTTP where a scenario must see SSE ids or pick
its moment), and ends with one summary line. Not a pytest module: it needs root.
"""
