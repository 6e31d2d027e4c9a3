"""Tests of the deployment kit under ``deploy/``: each file passes its own validator
(kubernetes-validate in strict mode, ``systemd-analyze verify``, ``promtool check
rules`` and ``promtool test rules``, hadolint), and agrees with rota itself: the flags
it passes are ones rota accepts, the executor's stop timeouts outlast its drain, and
the alert rules name metrics a real ``rota serve`` exports. A missing validator
fails its test; none is skipped.
"""
