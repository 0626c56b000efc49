//! Roles: the prompt every brain of an instance gets, versioned by the hash
//! of its text.
