//! TODO environment
