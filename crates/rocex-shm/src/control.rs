//! Control channel messages.
