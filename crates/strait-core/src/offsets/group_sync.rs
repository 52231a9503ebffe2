//! Group sync (`sync.group.offsets.enabled`): being written (see the offsets issue).
