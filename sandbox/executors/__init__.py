"""Executors: several measurements in flight, locally (pinned slots) or on a Ray cluster."""

from .base import Done, Executor, ExecutorError, Task
from .local import LocalExecutor, SlotRunner
from .slots import SlotDevice, available_cores, plan_slots, visible_gpus

__all__ = ["Done", "Executor", "ExecutorError", "Task", "LocalExecutor", "SlotRunner", "SlotDevice",
           "available_cores", "plan_slots", "visible_gpus"]
