"""Tests with real ``rota`` processes and real signals (mostly marked ``slow``): executors
sharing and losing jobs, shutdown, rolling deploys, database outages and refused roles,
children outliving a killed executor, the soak.
"""
