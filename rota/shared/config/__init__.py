"""The frozen config objects of schedules and job types (``model``).

The file that declares them is read by ``rota.scheduler.schedule_file``.
"""
