"""The checkpoint coordinator (Storm's CheckpointSpout state machine) and crash points."""

from weir.checkpoint.coordinator import (
    BatchReport,
    CheckPointState,
    CheckpointStore,
    Coordinator,
    JobOutcome,
    Participants,
    Phase,
    TaskFailure,
    checkpoint_namespace,
)

__all__ = [
    "BatchReport",
    "CheckPointState",
    "CheckpointStore",
    "Coordinator",
    "JobOutcome",
    "Participants",
    "Phase",
    "TaskFailure",
    "checkpoint_namespace",
]
