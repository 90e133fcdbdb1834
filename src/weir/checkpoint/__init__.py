"""The checkpoint coordinator (Storm's CheckpointSpout state machine) and crash points."""

from weir.checkpoint.coordinator import (
    BatchReport,
    CheckpointPhase,
    CheckPointState,
    CheckpointStore,
    Coordinator,
    JobOutcome,
    Participants,
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
    "CheckpointPhase",
    "TaskFailure",
    "checkpoint_namespace",
]
