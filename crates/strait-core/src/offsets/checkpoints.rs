//! MM2 checkpoints: being written (see the offsets issue).
