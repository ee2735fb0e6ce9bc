"""Trajectory I/O: the masked `trajectory.json` artifact, ATIF export, working-directory changes."""

from envloop.trajectories.atif import ATIF_VERSION, AtifTrajectory, atif_document, to_atif
from envloop.trajectories.files import read_trajectory, write_trajectory
from envloop.trajectories.render import describe_trajectory
from envloop.trajectories.workspace import FileState, Snapshot, changes_between, snapshot

__all__ = [
    "ATIF_VERSION",
    "AtifTrajectory",
    "FileState",
    "Snapshot",
    "atif_document",
    "changes_between",
    "describe_trajectory",
    "read_trajectory",
    "snapshot",
    "to_atif",
    "write_trajectory",
]
