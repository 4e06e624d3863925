//! logship-store: a RocketMQ-compatible mmap commit log.
