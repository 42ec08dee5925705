//! Size and rate parsing.
