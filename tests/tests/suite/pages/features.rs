//! Page tests of this group (being written).
